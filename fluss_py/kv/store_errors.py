"""RocksDB's failures as the rest of the server knows them (docs/primary-key-tables.md §9).

``rocksdict`` raises a plain ``Exception`` whose text is RocksDB's ``Status::ToString()``, or a Rust I/O
error of its own::

    IO error: [<subcode>: ]<context>[: <file>]: <strerror>     e.g. "IO error: No space left on device: While
                                                                appending to file: /d/7-0/kv/000008.log: No
                                                                space left on device"
    Corruption: ...   Invalid argument: ...   (any other status)
    File exists (os error 17)                                  (rocksdict's own I/O)

``classify`` turns one into a ``KvStoreError`` (a STORAGE_ERROR: retriable, the client refreshes its
metadata), or None for an exception that is not RocksDB's (a bug: it keeps its own type):

- ``disk``: an I/O error. Its ``__cause__`` is an ``OSError`` with the errno that the ``strerror`` at the end
  of the text names (ENOSPC, EIO, EROFS, ...; EIO when the text names none), or a ``disk_io.FsyncFailed``
  when the context is a sync call (``While fsync``, ``While fdatasync``, ``While sync_file_range``): the data
  directory's failure handling reads the same errno and the same "an fsync failed" as for a log
  (``DirFailure.of``), so a KV on a full disk comes back with its directory and one whose fsync failed does
  not. Its text names no file (a file names its table's bucket; the full RocksDB text is logged).
- not ``disk``: the store is broken (Corruption, a file it needs is missing, an invalid argument): nothing
  the directory did. ``missing_or_corrupt`` says whether it is one a rebuild from the log cures.

``rocksdb_call`` is the decorator of every ``KvStore`` method that calls RocksDB: it classifies, tells the
store's ``KvResources.on_error`` (the replica layer), and raises the ``KvStoreError`` (``failure``).
"""

from __future__ import annotations

import errno
import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from fluss_py.errors import StorageError
from fluss_py.log.disk_io import FsyncFailed

_F = TypeVar("_F", bound=Callable[..., Any])
IO_ERROR = "IO error: "
# RocksDB's sub-codes of an IO error (status.cc), each with the errno it stands for when the text ends with
# no ``strerror`` this system knows
_SUBCODES = {
    "No space left on device": errno.ENOSPC,
    "No such file or directory": errno.ENOENT,
    "Stale file handle": errno.ESTALE,
}
_BY_STRERROR = {os.strerror(n): n for n in sorted(errno.errorcode, reverse=True)}
_RUST_IO = re.compile(r"^(?P<text>.*) \(os error (?P<errno>\d+)\)$", re.S)


class KvStoreError(StorageError):  # type: ignore[misc,valid-type]
    """A RocksDB call of one KV store failed; see the module docstring. ``rocksdb`` is RocksDB's whole text."""

    def __init__(self, message: str, rocksdb: str, *, disk: bool, missing_or_corrupt: bool = False) -> None:
        super().__init__(message)
        self.rocksdb = rocksdb
        self.disk = disk
        self.missing_or_corrupt = missing_or_corrupt


def classify(error: BaseException) -> KvStoreError | None:
    """``error`` (raised by a ``rocksdict`` call) as a ``KvStoreError``; None when it is not RocksDB's. An
    ``OSError`` (the store's own file handling) is a disk error with its own errno."""
    if isinstance(error, OSError):
        number = error.errno or errno.EIO
        disk = KvStoreError(f"KV store: {error} ({errno.errorcode.get(number, number)})", str(error), disk=True)
        disk.__cause__ = error
        return disk
    if type(error) is not Exception or not error.args or not isinstance(error.args[0], str):
        return None
    text: str = error.args[0]
    rust = _RUST_IO.match(text)
    if rust is not None:  # rocksdict's own file handling (a directory it cannot make, ...)
        return _disk(int(rust["errno"]), "", text)
    if not text.startswith(IO_ERROR):
        kind = text.split(":", 1)[0]
        return KvStoreError(f"KV store is broken ({kind})", text, disk=False, missing_or_corrupt=kind == "Corruption")
    body = text[len(IO_ERROR) :]
    subcode = next((s for s in _SUBCODES if body == s or body.startswith(s + ": ")), None)
    if subcode is not None:
        body = body[len(subcode) + 2 :]
    context, _, rest = body.partition(": ")
    context = context.split(";", 1)[0]  # ("Writer has previous error.; IO error: ...": the first says it)
    number = _BY_STRERROR.get(rest.rpartition(": ")[2]) or (_SUBCODES[subcode] if subcode else errno.EIO)
    if number == errno.ENOENT:  # a file of the store is gone: the store is broken, not the disk
        return KvStoreError(f"KV store is missing a file ({context})", text, disk=False, missing_or_corrupt=True)
    return _disk(number, context if rest else "", text)


def _disk(number: int, context: str, text: str) -> KvStoreError:
    """An I/O error with ``number``'s errno; ``context`` is RocksDB's (``While fdatasync``: a sync call)."""
    strerror = os.strerror(number)
    where = f"KV store: {context}: " if context else "KV store: "
    cause = (
        FsyncFailed(number, f"fsync failed: {where}{strerror}")
        if "sync" in context.lower()
        else OSError(number, f"{where}{strerror}")
    )
    error = KvStoreError(f"{cause.strerror} ({errno.errorcode.get(number, number)})", text, disk=True)
    error.__cause__ = cause
    return error


ErrorHook = Callable[[Path, KvStoreError], None]


def failure(error: Exception, path: Path, on_error: ErrorHook | None) -> Exception:
    """What a failed call of the store in ``path`` raises: ``error``'s ``KvStoreError`` (``on_error`` told
    first; its ``__cause__`` the ``OSError`` of a disk error, else ``error``), or ``error`` itself when it is
    not RocksDB's. Raise it ``from`` its ``__cause__``."""
    classified = classify(error)
    if classified is None:
        return error
    if classified.__cause__ is None:
        classified.__cause__ = error
    if on_error is not None:
        on_error(path, classified)
    return classified


def rocksdb_call(method: _F) -> _F:
    """A ``KvStore`` method that calls RocksDB: a failure raises ``failure(...)`` (told to ``on_error`` of the
    store's resources)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as e:
            error = failure(e, Path(self.path), self.resources.on_error)
            raise error from error.__cause__

    return wrapper  # type: ignore[return-value]
