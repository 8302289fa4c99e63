"""Small durable text files: Kafka's checkpoint format and the clean-shutdown marker.

Checkpoint format (``CheckpointFile``)::

    0                 <- version
    2                 <- number of entry lines
    <entry line>      <- whitespace-separated fields
    <entry line>

Writes go to ``<name>.tmp``, are fsynced, renamed over the target, and the directory is fsynced, so a
reader sees either the old or the new content, never a mix. Per data dir, ``OffsetCheckpoint`` files hold
``<table_id> <bucket> <offset>`` lines (high watermarks, recovery points, log start offsets).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fluss_py.errors import LogCorruptedError, StorageError
from fluss_py.types import TableBucket

CHECKPOINT_VERSION = 0
HIGH_WATERMARK_CHECKPOINT = "high-watermark-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".fluss_cleanshutdown"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """temp file + fsync + rename + fsync(dir)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"{path}: cannot write: {e}") from e


class CheckpointFile:
    """One checkpoint file of ``fields``-column entry lines (all integers or short words)."""

    def __init__(self, path: Path, fields: int) -> None:
        self.path = path
        self.fields = fields

    def write(self, entries: list[tuple]) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(entries))]
        lines += [" ".join(str(f) for f in e) for e in entries]
        write_atomic(self.path, ("\n".join(lines) + "\n").encode())

    def read(self) -> list[tuple[str, ...]] | None:
        """Entries as string tuples; None if the file does not exist; LogCorruptedError if malformed."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        if not text:
            return []
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) < 2:
            raise LogCorruptedError(f"{self.path}: truncated checkpoint (no version/count lines)")
        if lines[0].strip() != str(CHECKPOINT_VERSION):
            raise LogCorruptedError(f"{self.path}: unsupported checkpoint version {lines[0]!r}")
        try:
            count = int(lines[1])
        except ValueError:
            raise LogCorruptedError(f"{self.path}: bad entry count line {lines[1]!r}") from None
        body = lines[2:]
        if count != len(body):
            raise LogCorruptedError(f"{self.path}: header says {count} entries, found {len(body)}")
        out = []
        for i, line in enumerate(body, start=3):
            parts = tuple(line.split())
            if len(parts) != self.fields:
                raise LogCorruptedError(f"{self.path}: line {i} {line!r} does not have {self.fields} fields")
            out.append(parts)
        return out


class OffsetCheckpoint:
    """``<table_id> <bucket> <offset>`` per bucket, one file per kind per data dir. ``write`` of the offsets
    it wrote last time writes nothing (an idle server with thousands of buckets checkpoints every second)."""

    def __init__(self, path: Path) -> None:
        self._file = CheckpointFile(path, 3)
        self._written: dict[TableBucket, int] | None = None

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: dict[TableBucket, int]) -> None:
        if offsets == self._written:
            return
        self._file.write([(tb.table_id, tb.bucket, off) for tb, off in sorted(offsets.items())])
        self._written = dict(offsets)

    def read(self) -> dict[TableBucket, int]:
        entries = self._file.read() or []
        try:
            return {TableBucket(int(t), int(b)): int(o) for t, b, o in entries}
        except ValueError as e:
            raise LogCorruptedError(f"{self.path}: non-integer field ({e})") from None


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
