"""Recovery of one bucket directory on open (docs/storage.md §6), and the writer-state rebuild and log reset
that truncation shares with it.

``LogLoader.load`` turns whatever a crash or a clean shutdown left in the directory into a consistent
``LoadedLog``: contiguous, CRC-valid segments with correct indexes, an epoch cache matching the batches, writer
state as of the log end, and offsets with ``log_start <= hw <= leo`` and ``recovery_point <= leo``.
"""

from __future__ import annotations

import bisect
import logging
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from fluss_py.errors import LogCorruptedError
from fluss_py.log.config import LogConfig
from fluss_py.log.disk_io import rewrite_in_place
from fluss_py.log.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from fluss_py.log.index import CorruptIndexError
from fluss_py.log.reconcile import epoch_cache_contradiction, reconcile_offsets
from fluss_py.log.scrub import Corruption, check_segment_file, verify_segment_file
from fluss_py.log.segment import LogSegment
from fluss_py.log.writer_state import WriterStateManager
from fluss_py.record.batch import RecordBatch
from fluss_py.types import EpochEntry

log = logging.getLogger(__name__)

_KNOWN_FILE = re.compile(r"[0-9]{20}\.(log|index|timeindex|snapshot)")  # fullmatch ("$" takes a final "\n")
_LOG_DATA_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot")
_LEFTOVER_SUFFIXES = (".tmp", ".swap", ".cleaned", ".deleted")
KV_DIR_NAME = "kv"  # a primary-key bucket's RocksDB, beside its log (fluss_py.kv; docs/primary-key-tables.md §3.5)


@dataclass(slots=True)
class LoadedLog:
    """A recovered bucket directory, ready to be served by a ``LogTablet``."""

    segments: list[LogSegment]
    epoch_cache: LeaderEpochCache
    writers: WriterStateManager
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    high_watermark: int
    corruption: Corruption | None = None  # first corrupt batch below the recovery point (unclean start check)
    verified_bytes: int = 0  # bytes whose CRCs that check read
    dir_exists: bool = True  # False: a created log, whose directory comes with its first write


def _recovery_check(h: tuple, view: memoryview) -> None:
    RecordBatch(view).ensure_valid()


def reset_log(
    directory: Path,
    segments: list[LogSegment],
    offset: int,
    config: LogConfig,
    epoch_cache: LeaderEpochCache,
    writers: WriterStateManager,
    *,
    lazy: bool = False,
) -> list[LogSegment]:
    """Delete every segment, epoch entry and writer snapshot; return the new list: one empty segment at ``offset``.
    ``lazy``: its file is created by the first write (the loader, for a directory without segments: loading
    it then changes nothing on disk, so a crash before the first write loads the same again)."""
    for seg in segments:
        seg.delete()
    epoch_cache.clear()
    writers.clear()
    writers.delete_snapshots(lambda off: True)
    return [LogSegment(directory, offset, config.index_interval_bytes, new=lazy)]


def create_empty_log(directory: Path, config: LogConfig) -> LoadedLog:
    """A new, empty log for ``directory``, which does not exist yet: nothing is created on disk, the directory
    and its first segment's file come with the first write, the epoch file with its first entry (docs/storage.md
    §3 "Empty until written"); nothing to recover."""
    return LoadedLog(
        segments=[LogSegment(directory, 0, config.index_interval_bytes, new=True)],
        epoch_cache=LeaderEpochCache.new(directory / LEADER_EPOCH_CHECKPOINT),
        writers=WriterStateManager(directory),
        log_start_offset=0,
        log_end_offset=0,
        recovery_point=0,
        high_watermark=0,
        dir_exists=False,
    )


def rebuild_writer_state(
    writers: WriterStateManager, segments: list[LogSegment], bases: list[int], log_start: int, leo: int
) -> None:
    """Latest snapshot at or below ``leo``, then replay the batch headers after it (no CRC, no record decoding).

    ``bases`` is the sorted list of the segments' base offsets.
    """
    writers.delete_snapshots(lambda off: off > leo)
    loaded = writers.load_latest_snapshot(leo)
    start = log_start if loaded is None or loaded < log_start else loaded
    i = max(0, bisect.bisect_right(bases, start) - 1)
    for seg in segments[i:]:
        pos = seg.position_of(start) if seg.base_offset < start else 0
        for _, h, _ in seg.scan(pos, verify=False):
            if h[0] >= start:
                writers.update_from_header(h)


class LogLoader:
    """Owns the recovery of one bucket directory. Used only by ``LogTablet.open``, before the tablet exists for
    anyone else (so, like the tablet, synchronous and single-owner)."""

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.dir = directory
        self.config = config
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.writers = WriterStateManager(directory)

    def load(self, recovery_point: int, log_start: int | None, hw: int, clean: bool) -> LoadedLog:
        """Recover the directory given the checkpointed offsets and whether the last shutdown was clean."""
        started = time.monotonic()
        bases = self._scan_directory()
        try:
            self.epoch_cache = LeaderEpochCache.load(self.dir / LEADER_EPOCH_CHECKPOINT)
            rebuild_epochs = not (self.dir / LEADER_EPOCH_CHECKPOINT).exists()
        except LogCorruptedError as e:
            log.warning("%s; rebuilding it from the log", e)
            rebuild_epochs = True
        self.segments = [LogSegment(self.dir, b, self.config.index_interval_bytes) for b in bases]
        self._bases = list(bases)
        recover_from = len(self.segments)
        if not clean:
            recover_from = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        loaded, reindexed = self._load_flushed(recover_from)
        damaged_last: tuple[LogSegment, int] | None = None
        if loaded < recover_from:  # (a clean start) the last segment did not load: re-validate it whole
            damaged_last = self.segments[loaded], self.segments[loaded].size
            recover_from, recovery_point = loaded, self.segments[loaded].base_offset
        corruption, verified = reindexed, 0
        resume: tuple[int, int] | None = None  # where re-validation begins in segments[recover_from]
        if not clean:  # the medium may have changed what was fsynced: check it, but change nothing
            found, verified = self._verify_segments(self.segments[:recover_from])
            if found is not None and (corruption is None or found.offset < corruption.offset):
                corruption = found
            if recover_from < len(self.segments):  # and the segment holding the recovery point, up to it
                resume, found, checked = self._check_below_recovery_point(recover_from, recovery_point)
                verified += checked
                corruption = corruption or found
                if resume is None and recover_from < len(self.segments) - 1:  # kept, as any segment below it
                    self._reindex_damaged(recover_from)
                    recover_from += 1
        if recover_from < len(self.segments):
            self._recover_segments(recover_from, resume, rebuild_epochs, rewrite=not clean)
        leo = self.segments[-1].next_offset if self.segments else 0
        if corruption is not None and corruption.offset == leo and not clean:
            log.error("%s: the fsynced bytes of its last segment from offset %d on could not be located after "
                      "the damaged batch and were cut; the replica fetches them again", self.dir, leo)  # fmt: skip
        if damaged_last is not None and damaged_last[0].size < damaged_last[1]:
            log.error("%s: %d fsynced bytes of the last segment cut after a clean shutdown (log end now %d): the "
                      "batches after a damaged one cannot be located; the leader's copy fills them in again",
                      damaged_last[0].log_path, damaged_last[1] - damaged_last[0].size, leo)  # fmt: skip
        if self.segments:
            offsets = reconcile_offsets(self.segments[0].base_offset, leo, log_start, hw, recovery_point, clean)
            for problem in offsets.problems:
                log.warning("%s: checkpointed %s (a bad checkpoint: the log wins)", self.dir, problem)
            start, hw, recovery_point = offsets.log_start, offsets.high_watermark, offsets.recovery_point
        else:
            start = 0 if log_start is None else log_start
            self.segments = reset_log(
                self.dir, self.segments, start, self.config, self.epoch_cache, self.writers, lazy=True
            )
            self._bases = [start]
            leo = recovery_point = hw = start
        if not rebuild_epochs:
            reason = self._epoch_cache_contradiction(start, leo, clean)
            if reason is not None:
                log.warning("%s: %s %s; rebuilding it from the log", self.dir, LEADER_EPOCH_CHECKPOINT, reason)
                rebuild_epochs = True
        if rebuild_epochs:
            self._rebuild_epoch_cache()
        self.epoch_cache.truncate_from_end(leo)
        self.epoch_cache.truncate_from_start(start)
        rebuild_writer_state(self.writers, self.segments, self._bases, start, leo)
        loaded = LoadedLog(
            segments=self.segments,
            epoch_cache=self.epoch_cache,
            writers=self.writers,
            log_start_offset=start,
            log_end_offset=leo,
            recovery_point=recovery_point,
            high_watermark=hw,
            # at the log end: fsynced bytes that could not be kept (the replica still reports them: §9)
            corruption=corruption if corruption is not None and start <= corruption.offset <= leo else None,
            verified_bytes=verified,
        )
        log.info(
            "%s: loaded %d segments, log [%d, %d), hw %d, %s shutdown (%d MB CRC-checked), %.3f s",
            self.dir,
            len(self.segments),
            start,
            leo,
            loaded.high_watermark,
            "clean" if clean else "unclean",
            verified // 1_000_000,
            time.monotonic() - started,
        )
        return loaded

    def _load_flushed(self, count: int) -> tuple[int, Corruption | None]:
        """Load the first ``count`` segments, all below the recovery point (fsynced), from their indexes. One
        whose index is bad or whose batches do not end the file is re-indexed, never cut; its first bad batch
        is returned for the replica layer to repair. Only the last segment, whose end no later segment names,
        is left for re-validation (with a cut) instead: returns (where re-validation starts, the corruption)."""
        corruption = None
        for i, seg in enumerate(self.segments[:count]):
            if seg.load():
                continue
            if i == len(self.segments) - 1:
                return i, corruption
            found = seg.reindex(self._bases[i + 1], _recovery_check)
            if found is not None:
                offset, position, why = found
                log.error("%s: corrupt batch at offset %d (position %d): %s; kept for the replica to repair",
                          seg.log_path, offset, position, why)  # fmt: skip
                if corruption is None:
                    corruption = Corruption(seg.log_path, seg.base_offset, offset, position, why)
        return count, corruption

    def _verify_segments(self, segments: list[LogSegment]) -> tuple[Corruption | None, int]:
        """CRC-check segments recovery trusts (below the recovery point): (the first corrupt batch or None,
        bytes read). A corrupt segment is reported once, here; the replica layer repairs it from the leader (a
        follower truncates to the offset and fetches again) instead of recovery cutting a log that may hold
        the only copy of later batches."""
        verified = 0
        for seg in segments:
            corruption = verify_segment_file(seg.log_path, seg.base_offset, seg.size)
            verified += seg.size if corruption is None else corruption.position
            if corruption is not None:
                log.error("%s; the replica will be repaired from the leader", corruption)
                return corruption, verified
        return None, verified

    def _check_below_recovery_point(
        self, i: int, recovery_point: int
    ) -> tuple[tuple[int, int] | None, Corruption | None, int]:
        """CRC-check segments[i], which holds the recovery point, from its start up to the batch holding it
        (an fsync that reported success for bytes the disk lost leaves them there, zeros after a power cut).
        Returns (the (offset, position) where re-validation starts, or None when it cannot be located; the
        first bad batch below the recovery point, or None; the bytes checked). After a bad batch the batches
        cannot be walked: the segment's index may still locate one beyond it, which is checked too."""
        seg = self.segments[i]
        if recovery_point <= seg.base_offset or seg.size == 0:  # nothing below it here (20,000 idle logs: no open)
            return (seg.base_offset, 0), None, 0
        checked = check_segment_file(seg.log_path, seg.base_offset, seg.size, stop_offset=recovery_point)
        found = checked.corruption
        if found is None:
            return (checked.offset, checked.position), None, checked.position
        log.error("%s, below the recovery point %d; the replica will be repaired", found, recovery_point)
        resume: tuple[int, int] | None = None
        try:
            seg.offset_index.load(seg.size)
            offset, position = seg.offset_index.lookup(recovery_point)
        except CorruptIndexError:
            position = -1
        if position > found.position:  # an index entry past the damage: the batches from there on are checked
            again = check_segment_file(
                seg.log_path, seg.base_offset, seg.size, start=(offset, position), stop_offset=recovery_point
            )
            if again.corruption is None:
                resume = (again.offset, again.position)
        if resume is None and i == len(self.segments) - 1:  # the last segment: cut at the bad batch
            resume = (found.offset, found.position)
        return resume, found, checked.position

    def _reindex_damaged(self, i: int) -> None:
        """A segment damaged below the recovery point with a later segment: kept whole, its indexes covering
        the good prefix (as after a clean shutdown, step 3 of §6); the replica layer repairs it."""
        self.segments[i].reindex(self._bases[i + 1], _recovery_check)

    def _scan_directory(self) -> list[int]:
        """Delete leftovers of interrupted writes and orphan indexes; refuse unknown files."""
        names = {p.name for p in self.dir.iterdir()}
        for name in sorted(names):
            path = self.dir / name
            if name.endswith(_LEFTOVER_SUFFIXES):
                log.warning("%s: deleting leftover %s of an interrupted write", self.dir, name)
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
                continue
            if name == LEADER_EPOCH_CHECKPOINT or (name == KV_DIR_NAME and path.is_dir()):
                continue
            if _KNOWN_FILE.fullmatch(name) is None or not path.is_file():
                if path.is_file() and not name.endswith(_LOG_DATA_SUFFIXES):
                    log.warning("%s: %s is not log data; left alone", self.dir, name)
                    continue
                raise LogCorruptedError(
                    f"{path}: unknown {'file' if path.is_file() else 'entry'} in bucket directory (expected "
                    f"<20-digit offset>.log/.index/.timeindex/.snapshot or {LEADER_EPOCH_CHECKPOINT})"
                )
            stem, suffix = name.split(".")
            if suffix in ("index", "timeindex") and f"{stem}.log" not in names:
                log.warning("%s: deleting %s (no matching .log)", self.dir, name)
                path.unlink()
        return sorted(int(n[:20]) for n in names if n.endswith(".log") and _KNOWN_FILE.fullmatch(n))

    def _recover_segments(
        self, first: int, start: tuple[int, int] | None, rebuild_epochs: bool, *, rewrite: bool = False
    ) -> None:
        """Re-validate segments[first:] (from ``start``, an (offset, position), in the first); on corruption
        drop the rest. ``rewrite`` (an unclean start): write the re-validated bytes again (``rewrite_in_place``:
        an fsync that failed before the restart may have left them clean in the page cache, never written)."""
        expected = self.segments[first].base_offset
        i = first
        while i < len(self.segments):
            seg = self.segments[i]
            if seg.base_offset != expected and i != first:
                log.warning("%s: segment %d does not continue offset %d", self.dir, seg.base_offset, expected)
                self._drop_segments_from(i)
                break
            begin = start if i == first else None
            truncated, headers = seg.recover(begin, _recovery_check)
            if rewrite:
                rewrite_in_place(seg.log_path, begin[1] if begin is not None else 0, seg.size)
            for h in headers:
                epoch = h[2]
                latest = self.epoch_cache.latest_epoch
                if epoch >= 0 and (latest is None or epoch > latest) and not rebuild_epochs:
                    self.epoch_cache.assign(epoch, h[0])
            expected = seg.next_offset
            if truncated:
                self._drop_segments_from(i + 1)
                break
            i += 1

    def _drop_segments_from(self, i: int) -> None:
        for seg in self.segments[i:]:
            log.warning("%s: deleting segment %d after a corruption before it", self.dir, seg.base_offset)
            seg.delete()
        del self.segments[i:], self._bases[i:]

    def _epoch_cache_contradiction(self, start: int, leo: int, clean: bool) -> str | None:
        def batch_at(offset: int) -> tuple | None:
            i = bisect.bisect_right(self._bases, offset) - 1
            found = self.segments[i].find_batch(offset) if i >= 0 else None
            return None if found is None else found[1]

        last = batch_at(leo - 1) if leo > start else None
        return epoch_cache_contradiction(self.epoch_cache.entries(), start, leo, batch_at, last, clean)

    def _rebuild_epoch_cache(self) -> None:
        entries: list[EpochEntry] = []
        for seg in self.segments:
            for _, h, _ in seg.scan(0, verify=False):
                if h[2] >= 0 and (not entries or h[2] > entries[-1].epoch):
                    entries.append(EpochEntry(h[2], h[0]))
        self.epoch_cache.replace(entries)
