"""LogTablet: one bucket replica's log in one directory (segments, epoch cache, writer state).

Offsets: ``log_start_offset <= high_watermark <= log_end_offset``; ``recovery_point <= log_end_offset``
and every batch below the recovery point has been fsynced. Batches are contiguous: each batch's base offset
is the previous batch's last offset + 1, across segments too.

Lifecycle::

    open() --recover--> serving (append_as_leader / append_as_follower / read / truncate / flush / retention)
           --close()--> closed (clean: indexes, writer snapshot and epoch cache written)
           --delete()-> gone
"""

from __future__ import annotations

import bisect
import logging
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from fluss_py.errors import (
    DuplicateSequenceError,
    FencedLeaderEpochError,
    InvalidRecordBatchError,
    InvalidRequestError,
    LogCorruptedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from fluss_py.log.config import LogConfig
from fluss_py.log.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from fluss_py.log.segment import MAX_SEGMENT_POSITION, BatchMeta, LogSegment
from fluss_py.log.writer_state import BatchMetadata, WriterStateEntry, WriterStateManager, snapshot_path
from fluss_py.record.batch import (
    BATCH_HEADER_SIZE,
    HEADER,
    LOG_OVERHEAD,
    RecordBatch,
    increment_sequence,
    set_base_offset_and_epoch,
)
from fluss_py.types import EpochEntry, TableBucket

log = logging.getLogger(__name__)

_KNOWN_FILE = re.compile(r"^\d{20}\.(log|index|timeindex|snapshot)$")
_LEFTOVER_SUFFIXES = (".tmp", ".swap", ".cleaned", ".deleted")
_INT32_MAX = 2**31 - 1


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


def _validate_batch(view: memoryview, pos: int, size: int) -> None:
    RecordBatch(view[pos : pos + size]).ensure_valid()


def _recovery_check(h: tuple, view: memoryview) -> None:
    RecordBatch(view).ensure_valid()


class LogTablet:
    """Owns one bucket directory. Synchronous, single owner: the replica layer serialises every call."""

    def __init__(self, directory: Path, table_bucket: TableBucket, config: LogConfig) -> None:
        self.dir = directory
        self.table_bucket = table_bucket
        self.config = config
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.writers = WriterStateManager(directory)
        self._leo = 0
        self._log_start = 0
        self._hw = 0
        self._recovery_point = 0
        self._bytes_since_snapshot = 0
        self._closed = False

    # ------------------------------------------------------------------ open and recovery
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
        t = cls(dir, table_bucket, config)
        t._load(recovery_point, log_start_offset, high_watermark, clean_shutdown)
        return t

    def _load(self, recovery_point: int, log_start: int | None, hw: int, clean: bool) -> None:
        started = time.monotonic()
        bases = self._scan_directory()
        try:
            self.epoch_cache = LeaderEpochCache.load(self.dir / LEADER_EPOCH_CHECKPOINT)
            rebuild_epochs = not (self.dir / LEADER_EPOCH_CHECKPOINT).exists()
        except LogCorruptedError as e:
            log.warning("%s; rebuilding the leader-epoch cache from the log", e)
            rebuild_epochs = True
        self.segments = [LogSegment(self.dir, b, self.config.index_interval_bytes) for b in bases]
        self._bases = list(bases)
        recover_from = len(self.segments)
        if not clean:
            recover_from = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        for i, seg in enumerate(self.segments[:recover_from]):
            if not seg.load():  # a missing or corrupt index: re-validate from this segment on
                recover_from, recovery_point = i, seg.base_offset
                break
        if recover_from < len(self.segments):
            self._recover_segments(recover_from, recovery_point, rebuild_epochs)
        self._leo = self.segments[-1].next_offset if self.segments else 0
        first_base = self.segments[0].base_offset if self.segments else 0
        start = first_base if log_start is None else max(log_start, first_base)
        if not self.segments or self._leo < start:
            if self.segments:
                log.warning("%s: log end %d is below log start %d; starting over", self.dir, self._leo, start)
            self._reset_at(start)
        else:
            self._log_start = start
        if rebuild_epochs:
            self._rebuild_epoch_cache()
        self.epoch_cache.truncate_from_end(self._leo)
        self.epoch_cache.truncate_from_start(self._log_start)
        self._rebuild_writer_state()
        self._recovery_point = self._leo if clean else min(max(recovery_point, self._log_start), self._leo)
        self._hw = min(max(hw, self._log_start), self._leo)
        log.info(
            "%s: loaded %d segments, log [%d, %d), hw %d, %s shutdown, %.3f s",
            self.dir,
            len(self.segments),
            self._log_start,
            self._leo,
            self._hw,
            "clean" if clean else "unclean",
            time.monotonic() - started,
        )

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
            if name == LEADER_EPOCH_CHECKPOINT:
                continue
            if not _KNOWN_FILE.match(name) or not path.is_file():
                raise LogCorruptedError(
                    f"{path}: unknown file in bucket directory (expected <20-digit offset>.log/.index/"
                    f".timeindex/.snapshot or {LEADER_EPOCH_CHECKPOINT})"
                )
            stem, suffix = name.split(".")
            if suffix in ("index", "timeindex") and f"{stem}.log" not in names:
                log.warning("%s: deleting %s (no matching .log)", self.dir, name)
                path.unlink()
        return sorted(int(n[:20]) for n in names if n.endswith(".log") and _KNOWN_FILE.match(n))

    def _recover_segments(self, first: int, start_offset: int, rebuild_epochs: bool) -> None:
        """Re-validate segments[first:] (from ``start_offset`` in the first); on corruption drop the rest."""
        expected = self.segments[first].base_offset
        i = first
        while i < len(self.segments):
            seg = self.segments[i]
            if seg.base_offset != expected and i != first:
                log.warning("%s: segment %d does not continue offset %d", self.dir, seg.base_offset, expected)
                self._drop_segments_from(i)
                break
            truncated, headers = seg.recover(start_offset if i == first else None, expected, _recovery_check)
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

    def _rebuild_epoch_cache(self) -> None:
        entries: list[EpochEntry] = []
        for seg in self.segments:
            for _, h, _ in seg.scan(0, verify=False):
                if h[2] >= 0 and (not entries or h[2] > entries[-1].epoch):
                    entries.append(EpochEntry(h[2], h[0]))
        self.epoch_cache.replace(entries)

    def _rebuild_writer_state(self) -> None:
        """Latest snapshot at or below LEO, then replay the batches after it (headers only)."""
        self.writers.delete_snapshots(lambda off: off > self._leo)
        loaded = self.writers.load_latest_snapshot(self._leo)
        start = self._log_start if loaded is None or loaded < self._log_start else loaded
        self._replay_writer_state(start)
        self._bytes_since_snapshot = 0

    def _replay_writer_state(self, start: int) -> None:
        i = max(0, bisect.bisect_right(self._bases, start) - 1)
        for seg in self.segments[i:]:
            pos = seg.position_of(start) if seg.base_offset < start else 0
            for _, h, _ in seg.scan(pos, verify=False):
                if h[0] >= start:
                    self.writers.update_from_header(h)

    def _reset_at(self, offset: int) -> None:
        for seg in self.segments:
            seg.delete()
        self.segments = [LogSegment(self.dir, offset, self.config.index_interval_bytes)]
        self._bases = [offset]
        self._leo = self._log_start = self._hw = self._recovery_point = offset
        self.epoch_cache.clear()
        self.writers.clear()
        self.writers.delete_snapshots(lambda off: True)

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
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def writer_state(self, writer_id: int) -> WriterStateEntry | None:
        return self.writers.writers.get(writer_id)

    # ------------------------------------------------------------------ appends
    def append_as_leader(self, records: bytes, leader_epoch: int) -> LogAppendInfo:
        """Validate, dedupe, assign offsets, stamp ``leader_epoch`` and write. Nothing is written on error."""
        if leader_epoch < 0:
            raise InvalidRequestError(f"{self.table_bucket}: leader epoch {leader_epoch} must be >= 0")
        latest = self.epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise FencedLeaderEpochError(f"{self.table_bucket}: append with epoch {leader_epoch} < latest {latest}")
        buf = bytearray(records)
        view = memoryview(buf)
        metas: list[BatchMeta] = []
        writer_updates: list[tuple] = []
        duplicates: list[BatchMetadata] = []
        pending: dict[int, tuple[int, int]] = {}
        offset = self._leo
        count = 0
        max_ts = -1
        for pos, size, h in self._split(view):
            if size > self.config.max_batch_bytes:
                raise RecordBatchTooLargeError(
                    f"batch of {size} bytes exceeds log.max-batch-size ({self.config.max_batch_bytes})"
                )
            _validate_batch(view, pos, size)
            if h[9] >= 0:
                last_seq = increment_sequence(h[11], h[6])
                dup = self.writers.check(h[9], h[10], h[11], last_seq, pending)
                if dup is not None:
                    duplicates.append(dup)
                    continue
                writer_updates.append((h[9], h[10], h[11], last_seq, offset, offset + h[6], h[8]))
            set_base_offset_and_epoch(buf, pos, offset, leader_epoch)
            metas.append(BatchMeta(pos, size, offset, offset + h[6], h[8]))
            offset += h[6] + 1
            count += h[12]
            max_ts = max(max_ts, h[8])
        now_ms = int(time.time() * 1000)
        if duplicates:
            if metas:
                raise DuplicateSequenceError(f"{self.table_bucket}: request mixes duplicate and new batches")
            return LogAppendInfo(
                duplicates[0].first_offset,
                duplicates[-1].last_offset,
                -1,
                now_ms,
                0,
                0,
                duplicate=True,
                leader_epoch=leader_epoch,
            )
        first = self._leo
        self._write(buf, metas)
        if latest is None or leader_epoch > latest:
            self.epoch_cache.assign(leader_epoch, first)
        for u in writer_updates:
            self.writers.update(*u)
        return LogAppendInfo(first, offset - 1, max_ts, now_ms, count, len(buf), False, leader_epoch)

    def append_as_follower(self, records: bytes) -> LogAppendInfo:
        """Append batches replicated from the leader, keeping their offsets and epochs."""
        now_ms = int(time.time() * 1000)
        if not records:
            return LogAppendInfo(self._leo, self._leo - 1, -1, now_ms, 0, 0)
        view = memoryview(records)
        metas: list[BatchMeta] = []
        headers: list[tuple] = []
        expected = self._leo
        epoch = self.epoch_cache.latest_epoch
        new_epochs: list[tuple[int, int]] = []
        count, max_ts = 0, -1
        for pos, size, h in self._split(view):
            _validate_batch(view, pos, size)
            if h[0] != expected:
                raise InvalidRecordBatchError(
                    f"{self.table_bucket}: replicated batch starts at offset {h[0]}, expected {expected}"
                )
            if epoch is not None and 0 <= h[2] < epoch:
                # Allowed only over epochs that hold no data yet (an election-time assign at our LEO);
                # assign() below drops them, as Kafka's follower path does.
                if new_epochs or any(e.epoch > h[2] and e.start_offset < h[0] for e in self.epoch_cache.entries()):
                    raise InvalidRecordBatchError(
                        f"{self.table_bucket}: replicated batch at {h[0]} has epoch {h[2]} < latest {epoch}"
                    )
                new_epochs.append((h[2], h[0]))
                epoch = h[2]
            elif h[2] >= 0 and (epoch is None or h[2] > epoch):
                new_epochs.append((h[2], h[0]))
                epoch = h[2]
            metas.append(BatchMeta(pos, size, h[0], h[0] + h[6], h[8]))
            headers.append(h)
            expected = h[0] + h[6] + 1
            count += h[12]
            max_ts = max(max_ts, h[8])
        first = self._leo
        self._write(records, metas)
        for e, start in new_epochs:
            self.epoch_cache.assign(e, start)
        for h in headers:
            self.writers.update_from_header(h)
        return LogAppendInfo(
            first, expected - 1, max_ts, now_ms, count, len(records), False, -1 if epoch is None else epoch
        )

    def _split(self, view: memoryview):
        """(position, size, header) of each batch; the buffer must be whole batches exactly."""
        if not len(view):
            raise InvalidRecordBatchError("empty records")
        pos, n = 0, len(view)
        while pos < n:
            if n - pos < BATCH_HEADER_SIZE:
                raise InvalidRecordBatchError(f"{n - pos} trailing bytes after the last batch (a torn batch)")
            h = HEADER.unpack_from(view, pos)
            size = h[1] + LOG_OVERHEAD
            if size < BATCH_HEADER_SIZE or pos + size > n:
                raise InvalidRecordBatchError(f"batch at position {pos} declares {size} bytes, {n - pos} present")
            yield pos, size, h
            pos += size

    def _write(self, buf: bytes | bytearray, metas: list[BatchMeta]) -> None:
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
        active.append(buf, metas)
        self._leo = last_offset + 1
        self._bytes_since_snapshot += len(buf)

    def roll(self) -> LogSegment:
        """Start a new segment at LEO (no-op if the active one is empty); writer snapshot at the new base."""
        active = self.segments[-1]
        if not active.size:
            return active
        active.flush(fsync=False)
        seg = LogSegment(self.dir, self._leo, self.config.index_interval_bytes)
        self.segments.append(seg)
        self._bases.append(self._leo)
        self.writers.take_snapshot(self._leo)
        self._bytes_since_snapshot = 0
        return seg

    # ------------------------------------------------------------------ reads
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
                    data = self._read_whole(seg, start, end, h[1] + LOG_OVERHEAD, max_bytes)
                break
        return FetchDataInfo(fetch_offset, data, self._log_start, self._hw, self._leo)

    @staticmethod
    def _read_whole(seg: LogSegment, start: int, end: int, first_size: int, max_bytes: int) -> bytes:
        length = end - start
        if length <= max_bytes:
            return seg.read(start, length)
        if first_size >= max_bytes:
            return seg.read(start, first_size)
        data = seg.read(start, max_bytes)
        cut, n = 0, len(data)
        while n - cut >= BATCH_HEADER_SIZE:
            size = int.from_bytes(data[cut + 8 : cut + 12], "big") + LOG_OVERHEAD
            if cut + size > n:
                break
            cut += size
        return data[:cut]

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
        return True

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
        self._leo = self.segments[-1].next_offset
        self.epoch_cache.truncate_from_end(self._leo)
        self._rebuild_writer_state()
        self._hw = min(self._hw, self._leo)
        self._recovery_point = min(self._recovery_point, self._leo)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        log.info("%s: deleting the whole log and restarting at %d", self.dir, offset)
        self._reset_at(offset)

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
        if (
            self.writers.changed_since_snapshot
            and self._bytes_since_snapshot >= self.config.writer_snapshot_interval_bytes
        ):
            self.writers.take_snapshot(self._leo)
            self._bytes_since_snapshot = 0
        self._recovery_point = max(self._recovery_point, target)

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past ``table.log.ttl`` or over the size limit (only below the HW)."""
        deleted = 0
        retention_ms = self.config.retention_ms

        def expired(seg: LogSegment) -> bool:
            return retention_ms > 0 and seg.size > 0 and now_ms - seg.max_timestamp > retention_ms

        def over_size(seg: LogSegment) -> bool:
            limit = self.config.retention_bytes
            return limit >= 0 and self.size_in_bytes - seg.size >= limit

        if len(self.segments) == 1 and expired(self.segments[0]) and self._hw == self._leo:
            self.roll()
        while len(self.segments) > 1:
            seg = self.segments[0]
            if seg.next_offset > self._hw or not (expired(seg) or over_size(seg)):
                break
            log.info("%s: retention deletes segment %d (%d bytes)", self.dir, seg.base_offset, seg.size)
            self.segments.pop(0).delete()
            self._bases.pop(0)
            deleted += 1
        if deleted:
            self._log_start = max(self._log_start, self.segments[0].base_offset)
            self.epoch_cache.truncate_from_start(self._log_start)
            self.writers.truncate_head(self._log_start)
            self._hw = max(self._hw, self._log_start)
            self._recovery_point = max(self._recovery_point, self._log_start)
        self.writers.expire(now_ms, int(self.config.writer_expiration_s * 1000))
        return deleted

    def expire_writers(self, now_ms: int) -> int:
        return self.writers.expire(now_ms, int(self.config.writer_expiration_s * 1000))

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Clean close: flush everything, write a writer snapshot at LEO."""
        if self._closed:
            return
        self.flush()
        for seg in self.segments:
            seg.close()
        if self.writers.changed_since_snapshot or not snapshot_path(self.dir, self._leo).exists():
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
