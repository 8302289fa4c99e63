"""Disk I/O that a data directory's failure handling depends on (docs/storage.md §10): the decorator of a
``LogTablet`` call that touches the disk, the one ``fsync`` of ``log/`` (whose failure says more than any
other disk error) and the writes that leave nothing behind when they fail."""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from fluss_py.errors import StorageError

if TYPE_CHECKING:
    from fluss_py.log.tablet import LogTablet

IoErrorHook = Callable[["LogTablet", BaseException], None]
_F = TypeVar("_F", bound=Callable[..., Any])
REWRITE_CHUNK = 8 * 1024 * 1024


class FsyncFailed(OSError):
    """An ``fsync`` failed (any errno: EIO, ENOSPC, ...). The kernel may have marked the dirty pages it could
    not write clean, or dropped them: a later fsync can succeed without writing them, and a read can still
    return them from the page cache. So nothing of the data directory is trusted again while the process
    lives (``LogDirs``: offline until a restart; docs/storage.md §10)."""


def fsync(fd: int) -> None:
    """``os.fsync``; a failure raises ``FsyncFailed`` with the same errno (its text says it was an fsync)."""
    try:
        os.fsync(fd)
    except OSError as e:
        raise FsyncFailed(e.errno or errno.EIO, f"fsync failed: {e.strerror or e}") from e


def fsync_failure_in(error: BaseException | None) -> bool:
    """``error`` is, or was caused by (``raise ... from``), a failed fsync."""
    while error is not None:
        if isinstance(error, FsyncFailed):
            return True
        error = error.__cause__
    return False


def write_fully(fd: int, buf: bytes | bytearray | memoryview) -> None:
    """``os.write`` until every byte is written. A short write (a disk filling up) is followed by another
    write, which then raises the real error (ENOSPC: "No space left on device"), not a made-up one."""
    view = memoryview(buf)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, f"write returned {written}")
        view = view[written:]


def append_or_nothing(fd: int, buf: bytes | bytearray, start: int) -> None:
    """Append ``buf`` to the file open at ``fd`` (O_APPEND), whose size is ``start``; when a write fails the
    file is cut back to ``start`` before the error is raised, so a failed append leaves nothing behind (a
    directory that failed on a full disk may come back: docs/storage.md §10). Should the cut fail too, what
    is left is a torn tail that the next load removes (a segment's lies above its recovery point) or
    rebuilds (an index whose size is not a whole number of entries)."""
    try:
        write_fully(fd, buf)
    except OSError as e:
        try:
            os.ftruncate(fd, start)
        except OSError as cut:  # a torn tail is left: above the recovery point, or an index rebuilt at load
            e.add_note(f"cutting the failed write back to {start} bytes failed too: {cut}")
        raise


def rewrite_in_place(path: os.PathLike[str] | str, start: int, end: int) -> None:
    """Write bytes [start, end) of ``path`` again with what a read returns for them. After an fsync failed in
    an earlier run of the process, the page cache may still hold those pages marked clean although they never
    reached the disk: the next fsync would skip them. Written again, they are dirty, and the next flush
    writes them (or fails, and takes the directory offline). Used at an unclean start on the bytes recovery
    re-validated above the recovery point."""
    if end <= start:
        return
    fd = os.open(path, os.O_RDWR)  # not O_APPEND: pwrite must land where the bytes were read
    try:
        pos = start
        while pos < end:
            chunk = os.pread(fd, min(REWRITE_CHUNK, end - pos), pos)
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.pwrite(fd, view, pos + len(chunk) - len(view)) :]
            pos += len(chunk)
    finally:
        os.close(fd)


def disk_io(method: _F) -> _F:
    """A call that touches the disk: an ``OSError`` (or the ``StorageError`` wrapping one) is reported to
    the tablet's ``io_error`` hook (the data dir's failure handling, docs/storage.md §10) and re-raised. A
    closed log's errors say nothing of the disk (EBADF), except a failed fsync, which always does."""

    @functools.wraps(method)
    def wrapper(self: LogTablet, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (OSError, StorageError) as e:
            report_io_error(self, e)
            raise

    return wrapper  # type: ignore[return-value]


def report_io_error(tablet: LogTablet, error: BaseException) -> None:
    """Tell ``tablet``'s ``io_error`` hook of a disk error in its bucket directory (its own, or its KV's:
    docs/primary-key-tables.md §9), unless the log is closed already and the error is no failed fsync."""
    if tablet.io_error is not None and (not tablet.closed or fsync_failure_in(error)):
        tablet.io_error(tablet, error)
