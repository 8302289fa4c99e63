"""One segment: ``<20-digit base offset>.log`` plus its sparse ``.index`` and ``.timeindex``.

The ``.log`` holds whole record batches back to back; the segment never looks inside a batch beyond its
61-byte header. Appends are one ``os.write`` of already-validated bytes; reads are one ``os.pread`` of a
byte range. Positions are int32 (segments stay below 2 GiB).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fluss_py.errors import StorageError
from fluss_py.log import disk_io
from fluss_py.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from fluss_py.log.open_files import SEGMENTS, OpenFiles
from fluss_py.record.batch import BATCH_HEADER_SIZE, HEADER, LOG_OVERHEAD

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SCAN_CHUNK = 8 * 1024 * 1024
MAX_SEGMENT_POSITION = 2**31 - 1


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(slots=True)
class BatchMeta:
    """What the segment needs to know about a batch it appends (computed by the tablet's validation)."""

    position: int  # within the buffer being appended
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def scan_batches(
    fd: int | Callable[[], int], start_pos: int, end: int, buffer: bytearray | None = None
) -> Iterator[tuple[int, tuple, memoryview]]:
    """(position, header tuple, batch bytes) for the whole batches of ``fd`` in [start_pos, end); stops at a
    torn tail or at a length that cannot be a batch. ``fd`` may be a function returning the descriptor, asked
    before each read (a segment's may be closed and reopened between two yields: ``open_files.py``). Reads in
    chunks of 8 MiB (more for a larger batch): as fast from the page cache as short header reads. Used by
    segments, recovery and the scrubber (which passes its own descriptor, so it may run in a thread). With
    ``buffer`` every chunk is read into it (no fresh allocation per chunk: twice as fast for a long scan), so a
    yielded view is valid only until the next one is asked for."""
    pos = start_pos
    unpack = HEADER.unpack_from
    descriptor: Callable[[], int] = fd if callable(fd) else lambda: fd
    while end - pos >= BATCH_HEADER_SIZE:
        want = min(len(buffer) if buffer is not None else SCAN_CHUNK, end - pos)
        if buffer is not None:
            view = memoryview(buffer)[: os.preadv(descriptor(), [memoryview(buffer)[:want]], pos)]
            chunk = view
        else:
            chunk = os.pread(descriptor(), want, pos)
            view = memoryview(chunk)
        cpos, clen = 0, len(chunk)
        while clen - cpos >= BATCH_HEADER_SIZE:
            h = unpack(view, cpos)
            size = h[1] + LOG_OVERHEAD
            if size < BATCH_HEADER_SIZE:
                return
            if cpos + size > clen:
                break
            yield pos + cpos, h, view[cpos : cpos + size]
            cpos += size
        if cpos == 0:
            # One batch larger than the chunk: read exactly it (or stop at a torn tail).
            if clen < BATCH_HEADER_SIZE:
                return
            h = unpack(view, 0)
            size = h[1] + LOG_OVERHEAD
            if size < BATCH_HEADER_SIZE or pos + size > end:
                return
            big = os.pread(descriptor(), size, pos)
            if len(big) < size:
                return
            yield pos, h, memoryview(big)
            cpos = size
        pos += cpos


class LogSegment:
    """Owns one segment's files and fd. Created and used only by its ``LogTablet`` (single owner). The
    ``.log`` descriptor is held while the segment is among the most recently used of ``files``
    (``open_files.py``); ``_file()`` reopens it after an eviction."""

    def __init__(
        self, directory: Path, base_offset: int, index_interval: int, files: OpenFiles = SEGMENTS, *, new: bool = False
    ) -> None:
        """``new``: the ``.log`` file does not exist and is created by the first use of the descriptor (a new
        log's directory stays empty until its first write: docs/storage.md §3 "Empty until written")."""
        self._files = files
        self._fd = -1
        self._closed = False
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval = index_interval
        self.log_path = directory / segment_name(base_offset, LOG_SUFFIX)
        self.offset_index = OffsetIndex(directory / segment_name(base_offset, INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(directory / segment_name(base_offset, TIME_INDEX_SUFFIX), base_offset)
        self.size = 0 if new else os.fstat(self._file()).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_timestamp: int | None = None
        self._bytes_since_index = 0
        self._dirty = False
        self._version = 0  # bumped by every change of the file: a sync started before it does not cover it

    # --- loading
    def load(self) -> bool:
        """Load indexes and find the segment's end; False if an index was missing or corrupt (caller recovers).
        An empty segment without index files is whole: it never had an entry to write (a server restarted
        with thousands of empty buckets must not rebuild thousands of indexes)."""
        if self.size == 0 and not self.offset_index.path.exists() and not self.time_index.path.exists():
            return True
        try:
            self.offset_index.load(self.size)
            self.time_index.load(MAX_SEGMENT_POSITION)
        except CorruptIndexError as e:
            log.warning("%s: %s; rebuilding the index", self.log_path, e)
            return False
        start_offset, start_pos = self.offset_index.last_entry
        if self.time_index.timestamps:
            self.max_timestamp = self.time_index.timestamps[-1]
            self.offset_of_max_timestamp = self.base_offset + self.time_index.rel_offsets[-1]
        self.next_offset = start_offset
        end = start_pos
        for pos, h, _ in self.scan(start_pos, verify=False):
            self._track(h)
            end = pos + h[1] + LOG_OVERHEAD
        self._bytes_since_index = end - start_pos
        if end != self.size:
            log.warning("%s: %d bytes after the last whole batch; recovering", self.log_path, self.size - end)
            return False
        self._read_first_timestamp()
        return True

    def _read_first_timestamp(self) -> None:
        if self.size >= BATCH_HEADER_SIZE:
            self.first_timestamp = HEADER.unpack(os.pread(self._file(), BATCH_HEADER_SIZE, 0))[7]

    def _track(self, h: tuple) -> None:
        self.next_offset = h[0] + h[6] + 1
        if h[8] > self.max_timestamp:
            self.max_timestamp = h[8]
            self.offset_of_max_timestamp = h[0]

    def recover(
        self, start: tuple[int, int] | None, check: Callable[[tuple, memoryview], None]
    ) -> tuple[int, list[tuple]]:
        """Re-validate batches from ``start``, the (base offset, position) of a batch (None: from the segment's
        start), rebuilding the indexes from there. ``check(header, view)`` raises on a bad batch. Truncates the
        file at the first torn, corrupt or discontinuous batch. Returns (bytes truncated, headers of the
        re-validated batches)."""
        expected_next, start_pos = (self.base_offset, 0) if start is None else start
        if start_pos > 0:
            try:
                self.offset_index.load(self.size)
                self.time_index.load(MAX_SEGMENT_POSITION)
                self.offset_index.truncate_to_position(start_pos)
                self.time_index.truncate_to_offset(expected_next)
                if self.time_index.timestamps:
                    self.max_timestamp = self.time_index.timestamps[-1]
                    self.offset_of_max_timestamp = self.base_offset + self.time_index.rel_offsets[-1]
            except CorruptIndexError as e:
                log.warning("%s: %s; rescanning the whole segment", self.log_path, e)
                expected_next, start_pos = self.base_offset, 0
        if start_pos == 0:
            self._reset_indexes()
        valid_end, headers, _ = self._revalidate(start_pos, expected_next, check)
        truncated = self.size - valid_end
        if truncated:
            log.warning("%s: truncating %d invalid bytes at position %d", self.log_path, truncated, valid_end)
            os.ftruncate(self._file(), valid_end)
            self.size = valid_end
        self._read_first_timestamp()
        self._changed()
        return truncated, headers

    def reindex(self, end_offset: int, check: Callable[[tuple, memoryview], None]) -> tuple[int, int, str] | None:
        """Rebuild the indexes from the segment's start over the batches that pass ``check``, without changing
        the ``.log`` (below the recovery point: fsynced bytes, maybe the only copy). The segment ends at
        ``end_offset``, the next segment's base. Returns (offset, position, why) of the first bad batch, or
        None when the batches fill the file and end there."""
        self._reset_indexes()
        valid_end, _, why = self._revalidate(0, self.base_offset, check)
        bad_offset = self.next_offset
        if why is None and valid_end != self.size:
            why = f"{self.size - valid_end} bytes after the last whole batch"
        if why is None and bad_offset != end_offset:
            why = f"the batches end at offset {bad_offset}, the next segment starts at {end_offset}"
        self.next_offset = end_offset
        self._read_first_timestamp()
        self._changed()
        return None if why is None else (bad_offset, valid_end, why)

    def _reset_indexes(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset

    def _revalidate(
        self, start_pos: int, expected_next: int, check: Callable[[tuple, memoryview], None]
    ) -> tuple[int, list[tuple], str | None]:
        """Index the batches from ``start_pos`` while each passes ``check`` and continues ``expected_next``:
        (end position of the valid prefix, their headers, why the walk stopped before the end or None)."""
        self.next_offset = expected_next
        self._bytes_since_index = self.index_interval  # index the first re-validated batch
        valid_end = start_pos
        headers: list[tuple] = []
        for pos, h, view in self.scan(start_pos, verify=True):
            if h[0] != expected_next:
                why = f"batch at position {pos} has base offset {h[0]}, expected {expected_next}"
                log.warning("%s: %s", self.log_path, why)
                return valid_end, headers, why
            try:
                check(h, view)
            except Exception as e:  # any invalid batch ends the valid prefix
                why = f"invalid batch at position {pos} (offset {h[0]}): {e}"
                log.warning("%s: %s", self.log_path, why)
                return valid_end, headers, why
            size = h[1] + LOG_OVERHEAD
            self._index_batch(pos, size, h[0], h[0] + h[6], h[8])
            headers.append(h)
            expected_next = self.next_offset
            valid_end = pos + size
        return valid_end, headers, None

    # --- scanning
    def scan(
        self, start_pos: int, *, verify: bool, end_pos: int | None = None
    ) -> Iterator[tuple[int, tuple, memoryview]]:
        """(position, header tuple, batch bytes) for whole batches from ``start_pos``; stops at a torn tail.

        ``verify`` is only a hint that the caller will look at the bytes (see ``scan_batches``).
        """
        end = self.size if end_pos is None else min(end_pos, self.size)
        return scan_batches(self._file, start_pos, end)

    def find_batch(self, offset: int) -> tuple[int, tuple] | None:
        """(position, header) of the batch holding ``offset`` (or the first after it); None past the end.

        Starts at the index entry at or before ``offset`` and walks headers in chunks of one index interval,
        so a lookup costs one or two ``pread`` calls whatever the batch size.
        """
        if offset >= self.next_offset:
            return None
        _, pos = self.offset_index.lookup(offset)
        unpack = HEADER.unpack_from
        chunk_size = max(self.index_interval, 4096) + BATCH_HEADER_SIZE
        while pos < self.size:
            chunk = os.pread(self._file(), min(chunk_size, self.size - pos), pos)
            cpos = 0
            while len(chunk) - cpos >= BATCH_HEADER_SIZE:
                h = unpack(chunk, cpos)
                if h[0] + h[6] >= offset:
                    return pos + cpos, h
                if h[1] + LOG_OVERHEAD < BATCH_HEADER_SIZE:
                    return None  # not a batch header: the caller's offset lies past valid data
                cpos += h[1] + LOG_OVERHEAD
            if cpos == 0:
                return None  # a torn header at the end
            pos += cpos
        return None

    def position_of(self, offset: int) -> int:
        """File position where the batch holding ``offset`` starts (``size`` if at or past the end)."""
        found = self.find_batch(offset)
        return self.size if found is None else found[0]

    def read(self, position: int, length: int) -> bytes:
        return os.pread(self._file(), length, position)

    # --- writing
    def append(self, buf: bytes | bytearray, batches: list[BatchMeta]) -> None:
        """Write ``buf`` (whole validated batches) with one ``os.write``; on failure nothing stays."""
        start = self.size
        try:
            disk_io.append_or_nothing(self._file(), buf, start)
        except OSError as e:
            raise StorageError(f"{self.log_path}: write failed: {e}") from e
        self.size = start + len(buf)
        if self.first_timestamp is None:
            self.first_timestamp = batches[0].max_timestamp
        for b in batches:
            self._index_batch(start + b.position, b.size, b.base_offset, b.last_offset, b.max_timestamp)
        self._changed()

    def _index_batch(self, position: int, size: int, base_offset: int, last_offset: int, max_ts: int) -> None:
        """Account one appended or re-validated batch: end offset, max timestamp, sparse index entries."""
        self.next_offset = last_offset + 1
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = base_offset
        if self._bytes_since_index >= self.index_interval:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        pos, h = found
        removed = self.size - pos
        os.ftruncate(self._file(), pos)
        self.size = pos
        self.offset_index.truncate_to_position(pos)
        self.time_index.truncate_to_offset(h[0])
        self._rescan_tail_stats()
        self._changed()
        return removed

    def truncate_to_position(self, position: int, offset: int) -> None:
        """Cut the file at ``position``, where the batch of base offset ``offset`` starts (a corrupt one whose
        header cannot be trusted to find it)."""
        position = min(position, self.size)
        os.ftruncate(self._file(), position)
        self.size = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(offset)
        self._rescan_tail_stats()
        self._changed()

    def _rescan_tail_stats(self) -> None:
        """Recompute next offset and max timestamp after a truncation (from the index, then a short scan)."""
        offset, pos = self.offset_index.last_entry
        self.next_offset = offset
        if self.time_index.timestamps:
            self.max_timestamp = self.time_index.timestamps[-1]
            self.offset_of_max_timestamp = self.base_offset + self.time_index.rel_offsets[-1]
        else:
            self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        for _, h, _ in self.scan(pos, verify=False):
            self._track(h)
        if self.size == 0:
            self.first_timestamp = None
        self._bytes_since_index = self.size - pos

    # --- durability and lifecycle
    def flush(self, fsync: bool = True) -> None:
        """fsync the log, then write and fsync the index tails (index entries never precede their data).

        ``fsync=False`` (segment roll) only writes the index tails; a later flush still fsyncs.
        """
        if not self._dirty:
            return
        if self.size:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        try:
            if fsync:
                disk_io.fsync(self._file())
            self.offset_index.flush(fsync)
            self.time_index.flush(fsync)
        except OSError as e:
            raise StorageError(f"{self.log_path}: flush failed: {e}") from e
        self._dirty = not fsync

    def begin_fsync(self) -> tuple[int, list[int]] | None:
        """Step 1 of a flush whose fsyncs run off the loop (docs/storage.md §7): write the index tails (page
        cache) and open new descriptors of the log and index files. Returns (write version, descriptors) for
        the caller to fsync and close, then ``end_fsync(version)``; None when nothing was written since the
        last fsync."""
        if not self._dirty or self._closed:
            return None
        if self.size:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        fds: list[int] = []
        try:
            self.offset_index.flush(fsync=False)
            self.time_index.flush(fsync=False)
            fds.append(os.dup(self._file()))
            for path in (self.offset_index.path, self.time_index.path):
                fds.append(os.open(path, os.O_RDONLY))
        except OSError as e:
            for fd in fds:
                os.close(fd)
            raise StorageError(f"{self.log_path}: flush failed: {e}") from e
        return self._version, fds

    def end_fsync(self, version: int) -> None:
        """The descriptors of ``begin_fsync`` were synced: clean, unless the segment changed since."""
        if self._version == version:
            self._dirty = False

    def _changed(self) -> None:
        self._dirty = True
        self._version += 1

    def _file(self) -> int:
        """The ``.log`` descriptor, reopened if it was evicted; EBADF once the segment is closed."""
        if self._fd >= 0:
            self._files.touch(self)
            return self._fd
        if self._closed:
            raise OSError(errno.EBADF, f"{self.log_path}: segment closed")
        self._fd = self._files.open(self, self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        return self._fd

    def evict(self) -> None:
        """Close the descriptor to make room for another segment's (``OpenFiles``); the next use reopens."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        if not self._closed:
            self.flush()
            self.close_without_flush()

    def close_without_flush(self) -> None:
        self._closed = True
        if self._fd >= 0:
            self._files.release(self)
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close_without_flush()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    @property
    def dirty(self) -> bool:
        """Written since the last fsync."""
        return self._dirty

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"


def read_whole_batches(seg: LogSegment, start: int, end: int, first_size: int, max_bytes: int) -> bytes:
    """The bytes of ``seg`` from ``start`` to ``end``, cut to whole batches within ``max_bytes`` (at least the
    first batch, of ``first_size`` bytes, so a fetch always makes progress)."""
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
