"""Idempotent-writer state of one bucket: per writer id the last 5 batches' sequence and offset ranges.

Leader rules (``check``), applied before anything is written:

    unknown writer                      -> accept (state may have expired or been truncated away)
    writer_epoch <  current             -> INVALID_WRITER_EPOCH
    writer_epoch >  current             -> base_sequence must be 0 (a bumped writer restarts), else OUT_OF_ORDER
    same epoch, [first,last] seq cached -> duplicate: answer with the cached offsets, append nothing
    same epoch, base != last_seq + 1    -> OUT_OF_ORDER_SEQUENCE

Followers and recovery only ``update`` (no checks), so a follower that becomes leader answers a retry of
a batch it replicated with the original offsets.

Snapshot file ``<20-digit offset>.snapshot`` (state after every batch below that offset)::

    int16 version (1) | uint32 CRC-32C of everything after it | int32 writer count
    per writer: int64 writer_id | int16 epoch | int64 last_timestamp | int8 n (1..5)
                n x (int32 first_seq | int32 last_seq | int64 first_offset | int64 last_offset)
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from fluss_py.errors import InvalidWriterEpochError, OutOfOrderSequenceError
from fluss_py.log.checkpoint import write_atomic
from fluss_py.record.batch import increment_sequence

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
MAX_CACHED_BATCHES = 5
KEEP_SNAPSHOTS = 3
_HEAD = struct.Struct(">hIi")
_WRITER = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqq")


class CorruptSnapshotError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class WriterStateEntry:
    writer_id: int
    writer_epoch: int
    last_timestamp: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class WriterStateManager:
    """Owned by one ``LogTablet``; called only from the tablet's (serialised) append/truncate/recovery paths."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.writers: dict[int, WriterStateEntry] = {}
        self.changed_since_snapshot = False

    # --- leader validation (pure with respect to self: nothing changes)
    def check(
        self, writer_id: int, writer_epoch: int, first_seq: int, last_seq: int, pending: dict[int, tuple[int, int]]
    ) -> BatchMetadata | None:
        """Validate one batch; returns the original batch if it is a duplicate. ``pending`` maps writer id
        -> (epoch, last_seq) of earlier batches of the same request and is updated for accepted ones."""
        entry = self.writers.get(writer_id)
        cur = pending.get(writer_id)
        if cur is None and entry is not None:
            cur = (entry.writer_epoch, entry.last_seq)
        if cur is not None:
            epoch, last = cur
            if writer_epoch < epoch:
                raise InvalidWriterEpochError(f"writer {writer_id}: epoch {writer_epoch} is older than {epoch}")
            if writer_epoch == epoch:
                if writer_id not in pending and entry is not None:
                    dup = entry.find_duplicate(first_seq, last_seq)
                    if dup is not None:
                        return dup
                expected = increment_sequence(last, 1)
                if first_seq != expected:
                    raise OutOfOrderSequenceError(
                        f"writer {writer_id} epoch {writer_epoch}: sequence {first_seq}, expected {expected}"
                    )
            elif first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"writer {writer_id}: first sequence of new epoch {writer_epoch} is {first_seq}, expected 0"
                )
        pending[writer_id] = (writer_epoch, last_seq)
        return None

    # --- updates (leader after a write, follower, recovery replay)
    def update(
        self,
        writer_id: int,
        writer_epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
    ) -> None:
        entry = self.writers.get(writer_id)
        if entry is None or writer_epoch != entry.writer_epoch:
            if entry is not None and writer_epoch < entry.writer_epoch:
                log.warning("writer %d: replicated epoch %d < %d", writer_id, writer_epoch, entry.writer_epoch)
            entry = self.writers[writer_id] = WriterStateEntry(writer_id, writer_epoch)
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        if timestamp > entry.last_timestamp:
            entry.last_timestamp = timestamp
        self.changed_since_snapshot = True

    def update_from_header(self, h: tuple) -> None:
        """Apply one batch header tuple (see ``record.batch.HEADER``) if it is idempotent."""
        writer_id = h[9]
        if writer_id < 0:
            return
        base_seq = h[11]
        self.update(writer_id, h[10], base_seq, increment_sequence(base_seq, h[6]), h[0], h[0] + h[6], h[8])

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget writers idle (by batch timestamp) for longer than ``expiration_ms``; returns how many."""
        dead = [w for w, e in self.writers.items() if now_ms - e.last_timestamp > expiration_ms]
        for w in dead:
            del self.writers[w]
        if dead:
            self.changed_since_snapshot = True
        return len(dead)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget writers whose last batch is below the log start (their data was deleted)."""
        dead = [w for w, e in self.writers.items() if e.last_offset < log_start_offset]
        for w in dead:
            del self.writers[w]
        self.delete_snapshots(lambda off: off < log_start_offset, keep_latest=True)

    def clear(self) -> None:
        self.writers.clear()
        self.changed_since_snapshot = True

    # --- snapshots
    def snapshot_offsets(self) -> list[int]:
        out = []
        for p in self.dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            try:
                out.append(int(p.name[: -len(SNAPSHOT_SUFFIX)]))
            except ValueError:
                continue
        return sorted(out)

    def take_snapshot(self, offset: int) -> None:
        body = bytearray()
        for e in self.writers.values():
            body += _WRITER.pack(e.writer_id, e.writer_epoch, e.last_timestamp, len(e.batches))
            for b in e.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
        count = struct.pack(">i", len(self.writers))
        crc = crc32c.crc32c(bytes(body), crc32c.crc32c(count))
        write_atomic(snapshot_path(self.dir, offset), struct.pack(">hI", SNAPSHOT_VERSION, crc) + count + bytes(body))
        self.changed_since_snapshot = False
        offsets = self.snapshot_offsets()
        for old in offsets[:-KEEP_SNAPSHOTS]:
            snapshot_path(self.dir, old).unlink(missing_ok=True)

    @staticmethod
    def read_snapshot(path: Path) -> dict[int, WriterStateEntry]:
        """The writers of a snapshot file; ``CorruptSnapshotError`` if it is malformed (CRC, layout, trailing
        bytes) or contradicts its name: every batch it remembers must lie below the offset it was taken at."""
        data = path.read_bytes()
        if len(data) < _HEAD.size:
            raise CorruptSnapshotError(f"{path.name}: truncated ({len(data)} bytes)")
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"{path.name}: unsupported version {version}")
        if crc32c.crc32c(data[6:]) != crc:
            raise CorruptSnapshotError(f"{path.name}: CRC mismatch")
        try:
            taken_at = int(path.name[: -len(SNAPSHOT_SUFFIX)])
        except ValueError:
            raise CorruptSnapshotError(f"{path.name}: not named <offset>{SNAPSHOT_SUFFIX}") from None
        writers: dict[int, WriterStateEntry] = {}
        pos = _HEAD.size
        try:
            for _ in range(count):
                wid, epoch, ts, n = _WRITER.unpack_from(data, pos)
                pos += _WRITER.size
                if wid < 0 or epoch < 0 or not 0 <= n <= MAX_CACHED_BATCHES or wid in writers:
                    raise CorruptSnapshotError(f"{path.name}: writer {wid} epoch {epoch} with {n} batches")
                entry = WriterStateEntry(wid, epoch, ts)
                for _ in range(n):
                    b = BatchMetadata(*_BATCH.unpack_from(data, pos))
                    pos += _BATCH.size
                    if not 0 <= b.first_offset <= b.last_offset < taken_at or b.first_seq < 0 or b.last_seq < 0:
                        raise CorruptSnapshotError(f"{path.name}: writer {wid}: {b} does not lie below {taken_at}")
                    entry.batches.append(b)
                writers[wid] = entry
        except struct.error as e:
            raise CorruptSnapshotError(f"{path.name}: {e}") from None
        if pos != len(data):
            raise CorruptSnapshotError(f"{path.name}: {len(data) - pos} bytes after the last writer")
        return writers

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest readable snapshot at or below ``max_offset``; returns its offset (None: none)."""
        self.writers = {}
        for off in reversed(self.snapshot_offsets()):
            if off > max_offset:
                continue
            path = snapshot_path(self.dir, off)
            try:
                self.writers = self.read_snapshot(path)
                self.changed_since_snapshot = False
                return off
            except (CorruptSnapshotError, OSError) as e:
                log.warning("%s: %s; deleting it and trying an older one", path, e)
                path.unlink(missing_ok=True)
        return None

    def delete_snapshots(self, predicate, keep_latest: bool = False) -> None:
        offsets = self.snapshot_offsets()
        if keep_latest and offsets:
            offsets = offsets[:-1]
        for off in offsets:
            if predicate(off):
                try:
                    os.unlink(snapshot_path(self.dir, off))
                except FileNotFoundError:
                    pass
