"""What a ``LogTablet`` hands out: ``LogAppendInfo`` (an append), ``FetchDataInfo`` (a read) and ``FlushJob`` (the
thread half of a flush off the event loop). Values and a job object; the tablet that made them owns the rest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fluss_py.errors import StorageError
from fluss_py.log import disk_io
from fluss_py.log.segment import LogSegment

if TYPE_CHECKING:
    from fluss_py.log.tablet import LogTablet


@dataclass(slots=True)
class LogAppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    append_time_ms: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False
    leader_epoch: int = -1


@dataclass(slots=True)
class FetchDataInfo:
    fetch_offset: int
    records: bytes
    log_start_offset: int
    high_watermark: int
    log_end_offset: int


@dataclass(eq=False)
class FlushJob:
    """One log's flush between ``begin_flush`` and ``end_flush``: the target offset, the truncation count at
    the start, the segments with their write versions, and the descriptors to fsync (then ``close``)."""

    tablet: LogTablet
    target: int
    truncations: int
    segments: list[tuple[LogSegment, int]] = field(default_factory=list)
    descriptors: list[int] = field(default_factory=list)
    epoch_writes: int = 0  # the epoch cache's write count its descriptors cover (``LeaderEpochCache.end_sync``)
    dirs: list[Path] = field(default_factory=list)  # directories its descriptors cover (``PendingDirSyncs.end``)
    error: OSError | None = None  # the fsync failure (``FsyncFailed``), if any

    def sync(self) -> None:
        """fsync every descriptor (any thread); raises StorageError naming the log on failure (kept in
        ``error`` for the loop to report to the log's data dir: ``report_failure``)."""
        try:
            for fd in self.descriptors:
                disk_io.fsync(fd)
        except OSError as e:
            self.error = e
            raise StorageError(f"{self.tablet.dir}: flush failed: {e}") from e

    def report_failure(self) -> None:
        """On the loop, after a failed ``sync``: the disk failed, tell the log's data dir (docs/storage.md §10),
        also when the log was closed meanwhile (its directory failed for another reason, or went away and came
        back): a failed fsync is never forgotten."""
        tablet = self.tablet
        if self.error is not None and tablet.io_error is not None:
            tablet.io_error(tablet, self.error)

    def close(self) -> None:
        for fd in self.descriptors:
            os.close(fd)
        self.descriptors = []
