"""Small durable text files: Kafka's checkpoint format and the clean-shutdown marker.

Checkpoint format (``CheckpointFile``)::

    0                 <- version
    2                 <- number of entry lines
    <entry line>      <- whitespace-separated fields
    <entry line>

Writes go to ``<name>.tmp``, are fsynced, renamed over the target, and the directory is fsynced, so a
reader sees either the old or the new content, never a mix. Reading is strict (ASCII, integers, the stated
count): whatever else is in the file raises ``LogCorruptedError``, and its owner rebuilds it from the log
(docs/storage.md "Bad checkpoints"). Per data dir, ``OffsetCheckpoint`` files hold
``<table_id> <bucket> <offset>`` lines (high watermarks, recovery points, log start offsets).
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

from fluss_py.errors import LogCorruptedError, StorageError
from fluss_py.log import disk_io
from fluss_py.types import TableBucket

CHECKPOINT_VERSION = 0
HIGH_WATERMARK_CHECKPOINT = "high-watermark-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".fluss_cleanshutdown"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INTEGER = re.compile(r"-?[0-9]{1,19}\Z")  # ASCII only (``int`` also takes "١٢", "1_000" and " 7 ")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        disk_io.fsync(fd)
    finally:
        os.close(fd)


class PendingDirSyncs:
    """Directories whose entries changed (a log's new directory in its data dir, a new segment file in the
    log's directory): fsynced with the next flush, before the recovery point passes the data in them (a file
    fsynced in a directory whose entry is not can still vanish in a power cut)."""

    def __init__(self) -> None:
        self._dirs: set[Path] = set()

    def add(self, *dirs: Path) -> None:
        self._dirs.update(dirs)

    def sync(self) -> None:
        for d in sorted(self._dirs):
            fsync_dir(d)
            self._dirs.discard(d)

    def begin(self) -> tuple[list[Path], list[int]]:
        """``sync`` for another thread: (the directories, their descriptors to fsync and close), then ``end``."""
        dirs, fds = sorted(self._dirs), []
        try:
            for d in dirs:
                fds.append(os.open(d, os.O_RDONLY | os.O_DIRECTORY))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return dirs, fds

    def end(self, dirs: list[Path]) -> None:
        self._dirs.difference_update(dirs)


def write_atomic(path: Path, data: bytes, fsync: bool = True) -> None:
    """temp file + fsync + rename + fsync(dir); ``fsync=False``: temp file + rename (a crash of the process
    still leaves the old or the new content; a power cut may leave either, or an empty file — for files
    whose owner syncs them later, or rebuilds them: the leader-epoch checkpoint)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            disk_io.write_fully(fd, data)
            if fsync:
                disk_io.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if fsync:
            fsync_dir(path.parent)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"{path}: cannot write: {e}") from e


class CheckpointFile:
    """One checkpoint file of ``fields``-column entry lines (all integers or short words)."""

    def __init__(self, path: Path, fields: int) -> None:
        self.path = path
        self.fields = fields

    def write(self, entries: list[tuple], fsync: bool = True) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(entries))]
        lines += [" ".join(str(f) for f in e) for e in entries]
        write_atomic(self.path, ("\n".join(lines) + "\n").encode(), fsync)

    def read(self) -> list[tuple[int, ...]] | None:
        """Entries as tuples of integers; None if the file does not exist; ``LogCorruptedError`` naming the
        file for anything else than this format exactly (ASCII decimal integers, ``fields`` per line)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if not raw:
            return []
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError as e:
            raise LogCorruptedError(
                f"{self.path}: not a text checkpoint (byte {e.start} is {raw[e.start]:#04x})"
            ) from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2:
            raise LogCorruptedError(f"{self.path}: truncated checkpoint (no version/count lines)")
        if lines[0].strip() != str(CHECKPOINT_VERSION):
            raise LogCorruptedError(f"{self.path}: unsupported checkpoint version {lines[0]!r}")
        if not _INTEGER.match(lines[1]):
            raise LogCorruptedError(f"{self.path}: bad entry count line {lines[1]!r}")
        count = int(lines[1])
        body = lines[2:]
        if count != len(body):
            raise LogCorruptedError(f"{self.path}: header says {count} entries, found {len(body)}")
        out = []
        for i, line in enumerate(body, start=3):
            parts = line.split()
            if len(parts) != self.fields or not all(_INTEGER.match(p) for p in parts):
                raise LogCorruptedError(f"{self.path}: line {i} {line!r} is not {self.fields} integers")
            values = tuple(int(p) for p in parts)
            if any(not _INT64_MIN <= v <= _INT64_MAX for v in values):
                raise LogCorruptedError(f"{self.path}: line {i} {line!r} holds a value outside int64")
            out.append(values)
        return out


class OffsetCheckpoint:
    """``<table_id> <bucket> <offset>`` per bucket, one file per kind per data dir. ``write`` of the offsets
    it wrote last time writes nothing (an idle server with thousands of buckets checkpoints every second).

    Writes may come from the event loop and from one worker thread (the replica layer's
    ``log_flush.checkpoint``): they are serialized, and a snapshot taken before the one already written
    (``seq``) is dropped, so the file never goes back to older offsets (docs/storage.md §7)."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile(path, 3)
        self._written: dict[TableBucket, int] | None = None
        self._seq = -1  # the snapshot the file holds
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: dict[TableBucket, int], seq: int | None = None) -> None:
        """Write ``offsets``, snapshot number ``seq`` (None: newer than any so far); nothing when a newer
        snapshot was written already or the offsets are those written last."""
        with self._lock:
            seq = self._seq + 1 if seq is None else seq
            if seq < self._seq:
                return
            if offsets != self._written:
                # sorted as tuples: comparing 20,000 TableBucket dataclasses took 0.5 s of a shutdown
                self._file.write(sorted((tb.table_id, tb.bucket, off) for tb, off in offsets.items()))
                self._written = dict(offsets)
            self._seq = seq

    def read(self) -> dict[TableBucket, int]:
        """``LogCorruptedError`` for a malformed file, a negative field or a bucket named twice."""
        entries = self._file.read() or []
        out = {TableBucket(t, b): o for t, b, o in entries}
        if len(out) != len(entries) or any(min(e) < 0 for e in entries):
            raise LogCorruptedError(f"{self.path}: a bucket named twice, or a negative id or offset")
        return out


def write_clean_shutdown_marker(data_dir: Path) -> None:
    write_atomic(data_dir / CLEAN_SHUTDOWN_MARKER, json.dumps({"version": 0}).encode())


def take_clean_shutdown_marker(data_dir: Path) -> bool:
    """True if the marker was there; it is deleted (and the deletion made durable) so a crash during
    start-up counts as unclean."""
    path = data_dir / CLEAN_SHUTDOWN_MARKER
    if not path.exists():
        return False
    path.unlink()
    fsync_dir(data_dir)
    return True
