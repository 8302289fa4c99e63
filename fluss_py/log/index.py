"""Sparse per-segment indexes, kept in memory and appended to their files on flush.

``.index``     entries of 8 bytes: int32 relative offset (batch base offset - segment base), int32 position
``.timeindex`` entries of 12 bytes: int64 max timestamp seen so far in the segment, int32 relative offset

(big-endian, Kafka's entry layouts). An entry is added at a batch boundary once ``index_interval_bytes`` of
log have been written since the previous entry. Entries are buffered and written by ``flush()`` (the
segment's flush, roll and close); after a crash indexes of unflushed segments are rebuilt from the log, and
an index that fails ``sanity_check`` is rebuilt too, so a lost index tail costs only a rescan.
"""

from __future__ import annotations

import bisect
import os
import struct
import sys
from array import array
from collections.abc import MutableSequence
from pathlib import Path

from fluss_py.log import disk_io


class CorruptIndexError(Exception):
    """An index file is inconsistent; the segment rebuilds it from the log."""


_BIG_ENDIAN_HOST = sys.byteorder == "big"


def _read_ints(path: Path, typecode: str) -> array:
    arr = array(typecode)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CorruptIndexError(f"{path.name}: missing") from None
    itemsize = arr.itemsize
    if len(data) % itemsize:
        raise CorruptIndexError(f"{path.name}: size {len(data)} is not a multiple of {itemsize}")
    arr.frombytes(data)
    if not _BIG_ENDIAN_HOST:
        arr.byteswap()
    return arr


class _SparseIndex:
    """Two parallel int columns in memory; their packed entries appended to the file on ``flush``."""

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._pending = bytearray()
        self._written = 0  # entries already in the file

    def _columns(self) -> tuple[MutableSequence[int], MutableSequence[int]]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._columns()[0])

    def _add(self, a: int, b: int) -> None:
        cols = self._columns()
        cols[0].append(a)
        cols[1].append(b)
        self._pending += self.ENTRY.pack(a, b)

    def _loaded(self) -> None:
        self._pending.clear()
        self._written = len(self)

    def _truncate_entries(self, keep: int) -> None:
        a, b = self._columns()
        if keep >= len(a):
            return
        del a[keep:], b[keep:]
        if keep < self._written:
            self._rewrite()
        else:
            self._pending = bytearray(self._pending[: (keep - self._written) * self.ENTRY.size])

    def reset(self) -> None:
        a, b = self._columns()
        del a[:], b[:]
        self._rewrite()

    def _rewrite(self) -> None:
        """Rewrite the whole file from memory (after a truncation below what was written)."""
        a, b = self._columns()
        _write_file(self.path, b"".join(self.ENTRY.pack(x, y) for x, y in zip(a, b, strict=True)))
        self._pending.clear()
        self._written = len(a)

    def flush(self, fsync: bool = True) -> None:
        if self._pending:
            _append_file(self.path, self._pending, fsync)
            self._written += len(self._pending) // self.ENTRY.size
            self._pending.clear()
        elif not self.path.exists():
            _write_file(self.path, b"")


class OffsetIndex(_SparseIndex):
    """Offset -> file position for one segment. Owned by its ``LogSegment``."""

    ENTRY = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self.rel_offsets = array("i")
        self.positions = array("i")

    def _columns(self) -> tuple[MutableSequence[int], MutableSequence[int]]:
        return self.rel_offsets, self.positions

    def load(self, log_size: int) -> None:
        """Read the file and check it (raises CorruptIndexError)."""
        raw = _read_ints(self.path, "i")
        if len(raw) % 2:
            raise CorruptIndexError(f"{self.path.name}: odd number of int32 fields")
        rel, pos = raw[0::2], raw[1::2]
        for i in range(1, len(rel)):
            if rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]:
                raise CorruptIndexError(f"{self.path.name}: entry {i} ({rel[i]}, {pos[i]}) does not increase")
        if len(rel) and (rel[0] < 0 or pos[0] < 0 or pos[-1] >= log_size):
            raise CorruptIndexError(f"{self.path.name}: positions outside the log ({pos[-1]} >= {log_size})")
        self.rel_offsets, self.positions = rel, pos
        self._loaded()

    def append(self, offset: int, position: int) -> None:
        self._add(offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(batch base offset, position) of the last entry at or before ``offset``; (base, 0) if none."""
        i = bisect.bisect_right(self.rel_offsets, offset - self.base_offset)
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self.rel_offsets[i - 1], self.positions[i - 1]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self.rel_offsets:
            return self.base_offset, 0
        return self.base_offset + self.rel_offsets[-1], self.positions[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or after ``position`` (the log is being cut there)."""
        keep = bisect.bisect_left(self.positions, position)
        self._truncate_entries(keep)


class TimeIndex(_SparseIndex):
    """Timestamp -> offset for one segment: entry (max timestamp so far, batch base offset)."""

    ENTRY = struct.Struct(">qi")

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self.timestamps: list[int] = []
        self.rel_offsets: list[int] = []

    def load(self, max_rel_offset: int) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise CorruptIndexError(f"{self.path.name}: missing") from None
        size = self.ENTRY.size
        if len(data) % size:
            raise CorruptIndexError(f"{self.path.name}: size {len(data)} is not a multiple of {size}")
        ts, rel = [], []
        for t, r in self.ENTRY.iter_unpack(data):
            if ts and (t < ts[-1] or r <= rel[-1]):
                raise CorruptIndexError(f"{self.path.name}: entry ({t}, {r}) does not increase")
            ts.append(t)
            rel.append(r)
        if rel and (rel[0] < 0 or rel[-1] > max_rel_offset):
            raise CorruptIndexError(f"{self.path.name}: offset {rel[-1]} outside the segment")
        self.timestamps, self.rel_offsets = ts, rel
        self._loaded()

    def maybe_append(self, max_timestamp: int, offset: int) -> None:
        """Add (max_timestamp, offset) if it raises the maximum timestamp."""
        if self.timestamps and max_timestamp <= self.timestamps[-1]:
            return
        self._add(max_timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """Base offset of a batch at or before the first batch with max timestamp >= ``timestamp``."""
        i = bisect.bisect_left(self.timestamps, timestamp)
        if i == 0:
            return self.base_offset
        return self.base_offset + self.rel_offsets[i - 1]

    def truncate_to_offset(self, offset: int) -> None:
        self._truncate_entries(bisect.bisect_left(self.rel_offsets, offset - self.base_offset))

    def _columns(self) -> tuple[MutableSequence[int], MutableSequence[int]]:
        return self.timestamps, self.rel_offsets


def _append_file(path: Path, data: bytes | bytearray, fsync: bool) -> None:
    """Append whole entries; a failed write is cut back (``append_or_nothing``): the entries stay pending."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        disk_io.append_or_nothing(fd, data, os.fstat(fd).st_size)
        if fsync:
            disk_io.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        disk_io.write_fully(fd, data)  # a short write raises the real error (a full disk), never passes
    finally:
        os.close(fd)
