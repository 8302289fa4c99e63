"""LogTablet: one bucket replica's log in one directory (segments, epoch cache, writer state).

Offsets: ``log_start_offset <= high_watermark <= log_end_offset``; ``recovery_point <= log_end_offset``
and every batch below the recovery point has been fsynced. Batches are contiguous: each batch's base offset
is the previous batch's last offset + 1, across segments too.

Lifecycle::

    open() --recover--> serving (append_as_leader / append_as_follower / read / truncate / flush / retention)
           --close()--> closed (clean: indexes, writer snapshot and epoch cache written)
           --delete()-> gone

Recovery lives in ``loader.py``, request validation in ``validator.py``; this module writes, reads,
truncates and deletes.
"""

from __future__ import annotations

import bisect
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from fluss_py.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    OffsetOutOfRangeError,
)
from fluss_py.log.checkpoint import PendingDirSyncs
from fluss_py.log.config import LogConfig
from fluss_py.log.disk_io import IoErrorHook, disk_io
from fluss_py.log.loader import LoadedLog, LogLoader, create_empty_log, rebuild_writer_state, reset_log
from fluss_py.log.results import FetchDataInfo, FlushJob, LogAppendInfo
from fluss_py.log.segment import MAX_SEGMENT_POSITION, BatchMeta, LogSegment, read_whole_batches
from fluss_py.log.validator import validate_follower_append, validate_leader_append
from fluss_py.log.writer_state import WriterStateEntry, snapshot_path
from fluss_py.record.batch import LOG_OVERHEAD
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1


class LogTablet:
    """Owns one bucket directory. Synchronous, single owner: the replica layer serialises every call.

    Construct with ``LogTablet.open`` (which recovers the directory first).
    """

    def __init__(self, directory: Path, table_bucket: TableBucket, config: LogConfig, loaded: LoadedLog) -> None:
        self.dir = directory
        self.table_bucket = table_bucket
        self.config = config
        self.segments = loaded.segments
        self._bases = [s.base_offset for s in self.segments]
        self._size = sum(s.size for s in self.segments)  # bytes of all segments, kept by each change of them
        self.epoch_cache = loaded.epoch_cache
        self.writers = loaded.writers
        self._leo = loaded.log_end_offset
        self._log_start = loaded.log_start_offset
        self._hw = loaded.high_watermark
        self._recovery_point = loaded.recovery_point
        self._bytes_since_snapshot = 0
        self._truncations = 0  # a flush begun before a truncation does not move the recovery point
        self._closed = False
        self.io_error: IoErrorHook | None = None  # set by the LogManager owning the data dir
        # told after every change of the LEO, HW, recovery point or log start (the LogManager's flush and
        # checkpoint rounds visit only the logs that changed: idle logs cost nothing)
        self.on_change: Callable[[LogTablet], None] | None = None
        # the first offset of a batch found corrupt (CRC, header, continuity) below the log end (at it: the
        # bytes from there on were cut at load); None: none known. Set by the unclean-start check and the
        # scrubber; cleared by a truncation to or below it.
        self.corrupt_from: int | None = None
        self.corrupt_segment_base = -1  # the segment holding it, and the position there
        self._corrupt_position = -1
        if loaded.corruption is not None:
            c = loaded.corruption
            self.mark_corrupt(c.offset, c.segment_base, c.position)
        self.verified_bytes = loaded.verified_bytes
        self._dir_made = loaded.dir_exists  # False for a created log until its first write (``_make_dir``)
        self.dir_syncs = PendingDirSyncs()  # new entries to fsync with the next flush
        self.holds_changelog = False  # a primary-key bucket's log: changelog batches only (set by the replica layer)

    @classmethod
    def open(
        cls,
        dir: Path,
        table_bucket: TableBucket,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
    ) -> LogTablet:
        """Open (creating if needed) and recover the log in ``dir``; see docs/storage.md "Recovery"."""
        dir = Path(dir)
        dir.mkdir(parents=True, exist_ok=True)
        loaded = LogLoader(dir, config).load(recovery_point, log_start_offset, high_watermark, clean_shutdown)
        return cls(dir, table_bucket, config, loaded)

    @classmethod
    def create(cls, dir: Path, table_bucket: TableBucket, config: LogConfig) -> LogTablet:
        """A new, empty log for ``dir``, which the caller found absent. Nothing is on disk until the first
        write makes the directory and the ``.log`` file (the first entry, the epoch file): a crash before
        leaves the bucket as if never created here, i.e. empty (docs/storage.md §3 "Empty until written")."""
        return cls(Path(dir), table_bucket, config, create_empty_log(Path(dir), config))

    def _make_dir(self) -> None:  # before any write (one mkdir, once): the directory of a created log
        if not self._dir_made:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._dir_made = True
            self.dir_syncs.add(self.dir.parent, self.dir)

    def _rebuild_writer_state(self) -> None:
        rebuild_writer_state(self.writers, self.segments, self._bases, self._log_start, self._leo)
        self._bytes_since_snapshot = 0

    def _reset_at(self, offset: int) -> None:
        self._make_dir()
        self.dir_syncs.add(self.dir)  # its new segment's file
        self.segments = reset_log(self.dir, self.segments, offset, self.config, self.epoch_cache, self.writers)
        self._bases = [offset]
        self._size = sum(s.size for s in self.segments)
        self._leo = self._log_start = self._hw = self._recovery_point = offset
        self._truncations += 1
        self.corrupt_from = None
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    # ------------------------------------------------------------------ properties
    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:  # O(1): appends count, truncation/retention/reset recount (test_held_bytes)
        return self._size

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def truncations(self) -> int:
        """How many truncations (or restarts) the log has had: a scrub begun before one is void."""
        return self._truncations

    @property
    def closed(self) -> bool:
        return self._closed

    def mark_corrupt(self, offset: int, segment_base: int, position: int) -> bool:
        """Record a corrupt batch at ``offset`` (at ``position`` in segment ``segment_base``; the lowest one
        wins); True when it is news. At the LEO: fsynced batches from there on were lost (cut at load)."""
        if offset > self._leo or (self.corrupt_from is not None and self.corrupt_from <= offset):
            return False
        self.corrupt_from, self.corrupt_segment_base, self._corrupt_position = offset, segment_base, position
        return True

    @disk_io
    def truncate_at_corruption(self) -> None:
        """Cut the log where the recorded corrupt batch starts (by position: its header may be the damaged
        part) and delete every later segment; then it is as after ``truncate_to(corrupt_from)``."""
        if self.corrupt_from is None:
            return
        if self.corrupt_segment_base not in self._bases:  # retention or a truncation removed it meanwhile
            self.corrupt_from = None
            return
        i = self._bases.index(self.corrupt_segment_base)
        log.warning("%s: truncating the corrupt log at offset %d (LEO %d)", self.dir, self.corrupt_from, self._leo)
        while len(self.segments) > i + 1:
            self.segments.pop().delete()
            self._bases.pop()
        self.segments[-1].truncate_to_position(self._corrupt_position, self.corrupt_from)
        self._after_truncation()

    def writer_state(self, writer_id: int) -> WriterStateEntry | None:
        return self.writers.writers.get(writer_id)

    # ------------------------------------------------------------------ appends
    @disk_io
    def append_as_leader(self, records: bytes, leader_epoch: int) -> LogAppendInfo:
        """Validate, dedupe, assign offsets, stamp ``leader_epoch`` and write. Nothing is written on error."""
        if leader_epoch < 0:
            raise InvalidRequestError(f"{self.table_bucket}: leader epoch {leader_epoch} must be >= 0")
        latest = self.epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise FencedLeaderEpochError(f"{self.table_bucket}: append with epoch {leader_epoch} < latest {latest}")
        buf = bytearray(records)
        now_ms = int(time.time() * 1000)
        v = validate_leader_append(
            buf,
            self._leo,
            leader_epoch,
            self.config.max_batch_bytes,
            self.writers,
            self.table_bucket,
            self.config.latest_timestamp(now_ms),
            self.holds_changelog,
        )
        if v.duplicates:
            first, last = v.duplicates[0].first_offset, v.duplicates[-1].last_offset
            return LogAppendInfo(first, last, -1, now_ms, 0, 0, duplicate=True, leader_epoch=leader_epoch)
        first = self._leo
        self._write(buf, v.metas)
        if latest is None or leader_epoch > latest:
            self.epoch_cache.assign(leader_epoch, first)
        for u in v.writer_updates:
            self.writers.update(*u)
        return LogAppendInfo(
            first, v.next_offset - 1, v.max_timestamp, now_ms, v.record_count, len(buf), False, leader_epoch
        )

    @disk_io
    def append_as_follower(self, records: bytes) -> LogAppendInfo:
        """Append batches replicated from the leader, keeping their offsets and epochs."""
        now_ms = int(time.time() * 1000)
        if not records:
            return LogAppendInfo(self._leo, self._leo - 1, -1, now_ms, 0, 0)
        v = validate_follower_append(
            memoryview(records), self._leo, self.epoch_cache, self.table_bucket, self.holds_changelog
        )
        first = self._leo
        self._write(records, v.metas)
        for e, start in v.new_epochs:
            self.epoch_cache.assign(e, start)
        for h in v.headers:
            self.writers.update_from_header(h)
        epoch = -1 if v.epoch is None else v.epoch
        return LogAppendInfo(
            first, v.next_offset - 1, v.max_timestamp, now_ms, v.record_count, len(records), False, epoch
        )

    def _write(self, buf: bytes | bytearray, metas: list[BatchMeta]) -> None:
        self._make_dir()
        active = self.segments[-1]
        last_offset = metas[-1].last_offset
        if active.size and (
            active.size + len(buf) > min(self.config.segment_bytes, MAX_SEGMENT_POSITION)
            or last_offset - active.base_offset > _INT32_MAX
            or (
                active.first_timestamp is not None
                and max(m.max_timestamp for m in metas) - active.first_timestamp > self.config.segment_max_age_s * 1000
            )
        ):
            self.roll()
            active = self.segments[-1]
        self.epoch_cache.write_deferred()  # a new term's entry is in the file before its first batch
        active.append(buf, metas)
        self._size += len(buf)
        self._leo = last_offset + 1
        self._bytes_since_snapshot += len(buf)
        self._changed()

    @disk_io
    def roll(self) -> LogSegment:
        """Start a new segment at LEO (no-op if the active one is empty); writer snapshot at the new base."""
        active = self.segments[-1]
        if not active.size:
            return active
        active.flush(fsync=False)
        seg = LogSegment(self.dir, self._leo, self.config.index_interval_bytes)
        self.dir_syncs.add(self.dir)
        self.segments.append(seg)
        self._bases.append(self._leo)
        self.writers.take_snapshot(self._leo)
        self._bytes_since_snapshot = 0
        return seg

    # ------------------------------------------------------------------ reads
    @disk_io
    def read(self, fetch_offset: int, max_bytes: int, upper_bound: int) -> FetchDataInfo:
        """Whole batches from the one holding ``fetch_offset``, below ``upper_bound``, about ``max_bytes``."""
        if fetch_offset < self._log_start or fetch_offset > self._leo:
            raise OffsetOutOfRangeError(
                f"{self.table_bucket}: offset {fetch_offset} is outside the log [{self._log_start}, {self._leo}]"
            )
        upper = min(upper_bound, self._leo)
        data = b""
        if fetch_offset < upper:
            i = bisect.bisect_right(self._bases, fetch_offset) - 1
            for seg in self.segments[max(i, 0) :]:
                found = seg.find_batch(fetch_offset)
                if found is None:
                    continue
                start, h = found
                end = seg.size if upper >= seg.next_offset else seg.position_of(upper)
                if end > start:
                    data = read_whole_batches(seg, start, end, h[1] + LOG_OVERHEAD, max_bytes)
                break
        return FetchDataInfo(fetch_offset, data, self._log_start, self._hw, self._leo)

    @disk_io
    def offset_for_timestamp(self, ts_ms: int) -> int | None:
        """Base offset of the first batch whose max timestamp is >= ``ts_ms`` (None if there is none)."""
        for seg in self.segments:
            if seg.max_timestamp < ts_ms:
                continue
            start = max(seg.time_index.lookup(ts_ms), self._log_start)
            for _, h, _ in seg.scan(seg.position_of(start), verify=False):
                if h[8] >= ts_ms:
                    return max(h[0], self._log_start)
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for(epoch, self._leo)

    # ------------------------------------------------------------------ offsets, truncation
    def update_high_watermark(self, offset: int) -> bool:
        new = min(max(offset, self._log_start), self._leo)
        if new == self._hw:
            return False
        self._hw = new
        self._changed()
        return True

    @disk_io
    def truncate_to(self, offset: int) -> None:
        """Remove everything at or after ``offset`` (a batch holding it goes whole); no-op if >= LEO."""
        if offset >= self._leo:
            return
        if offset < self._log_start:
            self.truncate_fully_and_start_at(offset)
            return
        log.info("%s: truncating from %d to %d", self.dir, self._leo, offset)
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            self.segments.pop().delete()
            self._bases.pop()
        self.segments[-1].truncate_to(offset)
        self._after_truncation()

    def _after_truncation(self) -> None:
        self._size = sum(s.size for s in self.segments)
        self._leo = self.segments[-1].next_offset
        self.epoch_cache.truncate_from_end(self._leo)
        self._rebuild_writer_state()
        self._hw = min(self._hw, self._leo)
        self._recovery_point = min(self._recovery_point, self._leo)
        self._truncations += 1
        if self.corrupt_from is not None and self.corrupt_from >= self._leo:
            self.corrupt_from = None
        self._changed()

    @disk_io
    def truncate_fully_and_start_at(self, offset: int) -> None:
        log.info("%s: deleting the whole log and restarting at %d", self.dir, offset)
        self._reset_at(offset)

    @disk_io
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding [recovery point, up_to) (default LEO) and advance the recovery point."""
        target = self._leo if up_to is None else min(up_to, self._leo)
        if target <= self._recovery_point and not self.segments[-1].dirty:
            return
        i = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
        for seg in self.segments[i:]:
            if seg.base_offset >= target and seg is not self.segments[-1]:
                break
            seg.flush()
        self.dir_syncs.sync()
        self.epoch_cache.sync()  # before the recovery point passes batches of the epochs it lists
        self._maybe_snapshot_writers()
        self._recovery_point = max(self._recovery_point, target)
        self._changed()

    def _maybe_snapshot_writers(self) -> None:
        if (
            self.writers.changed_since_snapshot
            and self._bytes_since_snapshot >= self.config.writer_snapshot_interval_bytes
        ):
            self.writers.take_snapshot(self._leo)
            self._bytes_since_snapshot = 0

    @disk_io
    def begin_flush(self) -> FlushJob | None:
        """Step 1 of ``flush()`` with the fsyncs left to the caller's thread (docs/storage.md §7): None when
        nothing is new, else a job whose ``descriptors`` are fsynced and closed elsewhere before
        ``end_flush(job)``."""
        target = self._leo
        if self._closed or (target <= self._recovery_point and not self.segments[-1].dirty):
            return None
        i = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
        job = FlushJob(self, target, self._truncations)
        try:
            for seg in self.segments[i:]:
                began = seg.begin_fsync()
                if began is not None:
                    job.segments.append((seg, began[0]))
                    job.descriptors.extend(began[1])
            job.epoch_writes, epoch_fds = self.epoch_cache.begin_sync()
            job.dirs, dir_fds = self.dir_syncs.begin()
            job.descriptors.extend(dir_fds)
            job.descriptors.extend(epoch_fds)
        except BaseException:
            job.close()
            raise
        return job

    def end_flush(self, job: FlushJob) -> None:
        """Step 3: the job's descriptors were synced. Segments unchanged since step 1 are clean; the recovery
        point moves to the job's target unless the log was truncated meanwhile or is closed."""
        for seg, version in job.segments:
            seg.end_fsync(version)
        self.epoch_cache.end_sync(job.epoch_writes)
        self.dir_syncs.end(job.dirs)
        if self._closed or self._truncations != job.truncations:
            return
        self._maybe_snapshot_writers()
        self._recovery_point = max(self._recovery_point, min(job.target, self._leo))
        self._changed()

    @disk_io
    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past ``table.log.ttl`` or over the size limit (only below the HW)."""
        deleted = 0
        retention_ms = self.config.retention_ms

        def expired(seg: LogSegment) -> bool:
            return retention_ms > 0 and seg.size > 0 and now_ms - seg.max_timestamp > retention_ms

        def over_size(seg: LogSegment) -> bool:
            limit = self.config.retention_bytes
            return limit >= 0 and self._size - seg.size >= limit

        if len(self.segments) == 1 and expired(self.segments[0]) and self._hw == self._leo:
            self.roll()
        while len(self.segments) > 1:
            seg = self.segments[0]
            if seg.next_offset > self._hw or not (expired(seg) or over_size(seg)):
                break
            log.info("%s: retention deletes segment %d (%d bytes)", self.dir, seg.base_offset, seg.size)
            self._size -= seg.size
            self.segments.pop(0).delete()
            self._bases.pop(0)
            deleted += 1
        if deleted:
            self._log_start = max(self._log_start, self.segments[0].base_offset)
            self.epoch_cache.truncate_from_start(self._log_start)
            self.writers.truncate_head(self._log_start)
            self._hw = max(self._hw, self._log_start)
            self._recovery_point = max(self._recovery_point, self._log_start)
            self._changed()
        self.writers.expire(now_ms, int(self.config.writer_expiration_s * 1000))
        return deleted

    def expire_writers(self, now_ms: int) -> int:
        return self.writers.expire(now_ms, int(self.config.writer_expiration_s * 1000))

    # ------------------------------------------------------------------ lifecycle
    @disk_io
    def close(self) -> None:
        """Clean close: flush everything, write a writer snapshot at LEO. An empty log without writers needs
        none (recovery has nothing to replay): a server with thousands of idle buckets stops without
        thousands of fsynced files (LEO 0: the loader drops any snapshot above the LEO, so none can be stale)."""
        if self._closed:
            return
        self.flush()
        for seg in self.segments:
            seg.close()
        empty = self._leo == 0 and not self.writers.writers
        if not empty and (self.writers.changed_since_snapshot or not snapshot_path(self.dir, self._leo).exists()):
            self.writers.take_snapshot(self._leo)
        self._closed = True

    def close_without_flush(self) -> None:
        """Drop file handles as a crash would (tests)."""
        for seg in self.segments:
            seg.close_without_flush()
        self._closed = True

    def delete(self) -> None:
        self.close_without_flush()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"LogTablet({self.table_bucket}, [{self._log_start}, {self._leo}), hw={self._hw})"
