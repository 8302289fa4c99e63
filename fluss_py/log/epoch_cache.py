"""Leader-epoch cache: epoch -> first offset written in it, persisted as ``leader-epoch-checkpoint``.

File (Kafka's ``CheckpointFile`` text format, byte-for-byte)::

    0            <- version
    2            <- entry count
    0 0          <- epoch startOffset
    3 1500

Invariant: epochs and start offsets are both strictly increasing. ``assign`` removes entries that would
break it (a new entry wins over conflicting older ones, as Kafka's ``LeaderEpochFileCache``).
Semantics of ``end_offset_for`` follow KIP-279 (see ``docs/storage.md``).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
from pathlib import Path

from fluss_py.errors import LogCorruptedError
from fluss_py.log import disk_io
from fluss_py.log.checkpoint import CheckpointFile, fsync_dir
from fluss_py.types import EpochEntry

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

log = logging.getLogger(__name__)


class LeaderEpochCache:
    """Owned by one ``LogTablet`` (single owner, synchronous). Every change is written (temp file + rename)
    before returning, but not fsynced: the owning log's flush syncs the file (``begin_sync``/``sync``) before
    its recovery point passes any batch, so the file on disk covers every flushed batch (docs/storage.md §5).
    An entry lost to a power cut names an epoch without flushed batches, which recovery does not need; batches
    above the recovery point are re-validated and their epochs assigned again.

    ``path=None`` keeps the cache in memory only (tests, dump tools). A change that leaves the entries as they
    are on disk writes nothing (a missing file reads as empty, and the loader rebuilds a missing file from the
    log): creating a bucket costs no checkpoint write until its first epoch is assigned.
    """

    def __init__(self, path: Path | None, entries: list[EpochEntry] | None = None) -> None:
        self._file = CheckpointFile(path, 2) if path is not None else None
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for e in entries or []:
            self._epochs.append(e.epoch)
            self._starts.append(e.start_offset)
        self._on_disk: list[tuple[int, int]] | None = None  # None: unknown, the next persist writes
        self._deferred = False  # an assign(write=False) is not in the file yet
        self._writes = 0  # file writes so far; ``_synced``: the count when the last sync began
        self._synced = 0

    @classmethod
    def new(cls, path: Path) -> LeaderEpochCache:
        """The empty cache of a new log whose file does not exist (a missing file reads as empty)."""
        cache = cls(path)
        cache._on_disk = []
        return cache

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache:
        """Read ``path`` (missing file = empty cache); ``LogCorruptedError`` naming the file if it is malformed,
        or its entries are negative or not strictly increasing. (Whether they match the log is the loader's
        check: ``fluss_py.log.loader``.)"""
        entries = [EpochEntry(e, o) for e, o in CheckpointFile(path, 2).read() or []]
        for e in entries:
            if e.epoch < 0 or e.start_offset < 0:
                raise LogCorruptedError(f"{path}: negative entry {e}")
        for a, b in itertools.pairwise(entries):
            if b.epoch <= a.epoch or b.start_offset <= a.start_offset:
                raise LogCorruptedError(f"{path}: entries not increasing ({a} then {b})")
        cache = cls(path, entries)
        cache._on_disk = [(e.epoch, e.start_offset) for e in entries]
        return cache

    # --- queries
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, o) for e, o in zip(self._epochs, self._starts, strict=True)]

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that covers ``offset`` (the last entry starting at or before it)."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """KIP-279: (the largest epoch <= requested that this log knows, where it ended), or (-1, -1).

        - requested == -1                 -> (-1, -1)
        - requested == latest epoch       -> (requested, LEO)
        - no epoch > requested            -> (-1, -1)
        - no epoch <= requested           -> (requested, start of the first higher epoch)
        - otherwise                       -> (floor epoch, start of the first higher epoch)
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs and self._epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        hi = bisect.bisect_right(self._epochs, requested_epoch)
        if hi == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_start = self._starts[hi]
        if hi == 0:
            return requested_epoch, higher_start
        return self._epochs[hi - 1], higher_start

    # --- changes
    def assign(self, epoch: int, start_offset: int, *, write: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed. ``write=False`` leaves
        the file as it is until ``write_deferred`` or any later change: for an entry starting at the log end
        (a new leader's term), which recovery drops anyway (§6: ``truncate_from_end(LEO)``)."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"cannot assign epoch {epoch} at offset {start_offset}")
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            return False
        # Drop entries that conflict with the new one (epoch >= new or start >= new).
        keep = len(self._epochs)
        while keep and (self._epochs[keep - 1] >= epoch or self._starts[keep - 1] >= start_offset):
            keep -= 1
        if keep != len(self._epochs):
            log.warning(
                "%s: assign(%d, %d) removes conflicting entries %s",
                self._file.path if self._file else "epoch cache",
                epoch,
                start_offset,
                self.entries()[keep:],
            )
        del self._epochs[keep:], self._starts[keep:]
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if write:
            self._persist()
        else:
            self._deferred = True
        return True

    def write_deferred(self) -> None:
        """Write the file if an ``assign(write=False)`` left it behind (before the first batch of its epoch)."""
        if self._deferred:
            self._persist()

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after ``end_offset`` (the log was truncated to it)."""
        i = bisect.bisect_left(self._starts, end_offset)
        if end_offset < 0 or i == len(self._starts):
            return False
        del self._epochs[i:], self._starts[i:]
        self._persist()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop entries wholly below ``start_offset``; the last of them is moved up to start there."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return False
        epoch = self._epochs[i - 1]
        del self._epochs[:i], self._starts[:i]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._persist()
        return True

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._persist()

    def replace(self, entries: list[EpochEntry]) -> None:
        """Replace every entry (used when rebuilding from the log)."""
        self._epochs = [e.epoch for e in entries]
        self._starts = [e.start_offset for e in entries]
        self._persist()

    def flush(self) -> None:
        self._persist()

    @property
    def unsynced(self) -> bool:
        """Written since the last completed sync."""
        return self._writes != self._synced

    def sync(self) -> None:
        """fsync the file and its directory (if written since the last sync)."""
        if self._file is None or not self.unsynced:
            return
        writes = self._writes
        fd = os.open(self._file.path, os.O_RDONLY)
        try:
            disk_io.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self._file.path.parent)
        self.end_sync(writes)

    def begin_sync(self) -> tuple[int, list[int]]:
        """``sync`` for another thread: (write count, descriptors of the file and its directory) for the caller
        to fsync and close, then ``end_sync(count)``; no descriptors when nothing was written since."""
        if self._file is None or not self.unsynced:
            return self._writes, []
        fds = [os.open(self._file.path, os.O_RDONLY)]
        try:
            fds.append(os.open(self._file.path.parent, os.O_RDONLY | os.O_DIRECTORY))
        except OSError:
            os.close(fds[0])
            raise
        return self._writes, fds

    def end_sync(self, writes: int) -> None:
        """The descriptors of ``begin_sync`` were synced: what was written up to then is on disk."""
        self._synced = max(self._synced, writes)

    def _persist(self) -> None:
        self._deferred = False
        if self._file is None:
            return
        entries = list(zip(self._epochs, self._starts, strict=True))
        if entries != self._on_disk:
            self._file.write(entries, fsync=False)
            self._on_disk = entries
            self._writes += 1

    def __repr__(self) -> str:
        return f"LeaderEpochCache({[(e, o) for e, o in zip(self._epochs, self._starts, strict=True)]})"
