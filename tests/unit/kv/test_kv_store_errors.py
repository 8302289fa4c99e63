"""A KV store's failures (docs/primary-key-tables.md §9): RocksDB's texts read as the log layer reads a disk
error (errno, a failed fsync, what comes back with a full disk), every failed call told to the server and
raised as STORAGE_ERROR, a store that cannot be made is a disk error, one RocksDB finds broken at open is made
again empty and rebuilt from the log. Real RocksDB in tmp_path; the failing calls through ``FailingDb``."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from fluss_py.errors import ErrorCode, StorageError
from fluss_py.kv.store import KvResources, KvStore
from fluss_py.kv.store_errors import KvStoreError, classify
from fluss_py.log.dirs import DirFailure
from tests.unit.kv.helpers import (
    CORRUPT_BLOCK,
    EIO_WRITE,
    ENOSPC_FSYNC,
    ENOSPC_WRITE,
    fail_store,
    key,
    kv_batch,
    kv_contents,
    open_kv,
    open_log,
    replay,
    row,
    upsert,
)

KV_DIR = "/data/fsync-tests/7-0/kv"  # (a "sync" in a path is no sync call)


@pytest.mark.parametrize(
    ("text", "code", "fsync_failed", "comes_back", "reason"),
    [
        (ENOSPC_WRITE, "ENOSPC", False, True, "KV store: While appending to file: No space left on device"),
        (EIO_WRITE, "EIO", False, False, "KV store: While appending to file: Input/output error"),
        (ENOSPC_FSYNC, "ENOSPC", True, False, "fsync failed: KV store: While fdatasync: No space left on device"),
        ("IO error: While fsync: a directory: Input/output error", "EIO", True, False,
         "fsync failed: KV store: While fsync: Input/output error"),
        ("IO error: While open a file for appending: {}/000012.log: Read-only file system", "EROFS", False, False,
         "KV store: While open a file for appending: Read-only file system"),
        ("IO error: Writer has previous error.; IO error: Writer has previous error.", "EIO", False, False,
         "KV store: Writer has previous error.: Input/output error"),
        ("File exists (os error 17)", "EEXIST", False, False, "KV store: File exists"),
    ],
)  # fmt: skip
def test_rocksdb_io_errors_read_as_the_log_layer_reads_a_disk_error(
    text: str, code: str, fsync_failed: bool, comes_back: bool, reason: str
) -> None:
    error = classify(Exception(text.format(KV_DIR)))
    assert isinstance(error, KvStoreError) and isinstance(error, StorageError) and error.disk
    assert error.code is ErrorCode.STORAGE_ERROR  # retriable: the client refreshes and finds the new leader
    failure = DirFailure.of(Path("/data"), error)  # what the data directory's failure handling reads
    assert (failure.code, failure.fsync_failed, failure.recoverable) == (code, fsync_failed, comes_back)
    assert failure.reason == reason and "7-0" not in error.message  # no file: it names a table's bucket
    assert error.rocksdb == text.format(KV_DIR)  # RocksDB's whole text, for the log


@pytest.mark.parametrize(
    ("text", "rebuilt_by_the_log"),
    [
        (CORRUPT_BLOCK, True),
        ("Corruption: CURRENT file does not end with newline", True),
        ("IO error: No such file or directory: While opening a file for sequentially reading: {}/MANIFEST-000005: "
         "No such file or directory", True),
        ("Invalid argument: Column family not found: x", False),
    ],
)  # fmt: skip
def test_a_broken_store_is_no_disk_error(text: str, rebuilt_by_the_log: bool) -> None:
    error = classify(Exception(text.format(KV_DIR)))
    assert isinstance(error, KvStoreError) and not error.disk and error.code is ErrorCode.STORAGE_ERROR
    assert error.missing_or_corrupt is rebuilt_by_the_log


def test_what_is_not_rocksdbs_is_left_alone() -> None:
    assert classify(TypeError("expected bytes")) is None
    assert classify(RuntimeError("KV store is closed")) is None
    error = classify(OSError(errno.ENOSPC, "No space left on device"))  # the store's own file handling
    assert error is not None and error.disk and DirFailure.of(Path("/d"), error).code == "ENOSPC"


def _told(resources: KvResources) -> list[tuple[Path, KvStoreError]]:
    told: list[tuple[Path, KvStoreError]] = []
    resources.on_error = lambda path, error: told.append((path, error))
    return told


def test_every_failed_call_is_told_to_the_server_and_raised_as_storage_error(tmp_path: Path) -> None:
    log = open_log(tmp_path / "7-0")
    kv = open_kv(log)
    kv.become_leader(log)
    kv.append_as_leader(log, kv_batch([upsert(1, "a", 1)]), 0)
    log.update_high_watermark(log.log_end_offset)
    resources = KvResources(8 << 20)
    kv.store._resources = resources
    told = _told(resources)
    fail_store(kv, write=ENOSPC_WRITE, get=EIO_WRITE)

    with pytest.raises(StorageError) as raised:
        kv.apply_committed(log, 1 << 20)
    assert told == [(kv.store.path, raised.value)] and raised.value.disk
    assert DirFailure.of(tmp_path, raised.value).recoverable  # a full disk: comes back with its directory
    assert kv.applied_offset == 0  # nothing applied, nothing claimed
    with pytest.raises(StorageError):
        kv.lookup([key(1)])
    assert len(told) == 2 and told[1][1].__cause__.errno == errno.EIO  # type: ignore[union-attr]

    kv.store._db = kv.store._db._db  # type: ignore[union-attr]  (the disk works again)
    assert kv.apply_committed(log, 1 << 20) == 1 and kv_contents(kv) == {key(1): row(1, "a", 1)}
    assert len(told) == 2
    kv.close()


def test_a_store_that_cannot_be_made_is_a_disk_error(tmp_path: Path) -> None:
    path = tmp_path / "7-0" / "kv"
    path.parent.mkdir()
    path.write_bytes(b"not a directory")  # real RocksDB, really refused
    resources = KvResources(8 << 20)
    told = _told(resources)
    with pytest.raises(KvStoreError) as raised:
        KvStore.open(path, resources)
    assert raised.value.disk and told == [(path, raised.value)]
    assert DirFailure.of(tmp_path, raised.value).code == "EEXIST"


@pytest.mark.parametrize("damage", ["CURRENT", "MANIFEST"])
def test_a_store_rocksdb_cannot_open_is_made_again_empty_and_rebuilt_from_the_log(tmp_path: Path, damage) -> None:
    log = open_log(tmp_path / "7-0")
    kv = open_kv(log)
    kv.become_leader(log)
    kv.append_as_leader(log, kv_batch([upsert(1, "a", 1), upsert(2, "b", 2)]), 0)
    kv.append_as_leader(log, kv_batch([upsert(1, "c", 3)]), 0)
    log.update_high_watermark(log.log_end_offset)
    kv.apply_committed(log, 1 << 20)
    path = kv.store.path
    kv.close()
    if damage == "CURRENT":
        (path / "CURRENT").write_text("garbage")  # "Corruption: CURRENT file does not end with newline"
    else:
        for f in path.glob("MANIFEST-*"):
            f.unlink()  # "IO error: No such file or directory: While opening ... MANIFEST-000005"
    told = _told(kv.store.resources)
    try:
        again = open_kv(log)
        assert again.store.recreated is not None and again.applied_offset == 0 and kv_contents(again) == {}
        while again.applied_offset < log.high_watermark:
            again.apply_committed(log, 1 << 20)
        assert kv_contents(again) == replay(log, log.log_end_offset) == {key(1): row(1, "c", 3), key(2): row(2, "b", 2)}
        assert told == []  # nothing for the server to do: the log rebuilt it
        again.close()
    finally:
        kv.store.resources.on_error = None
