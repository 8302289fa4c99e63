"""A failed fsync (docs/storage.md §10, "fsyncgate"): whatever its errno, on whatever file, its data dir goes
offline until the process restarts; a full disk whose writes failed still comes back, unless an fsync failed
too. Real files; only ``os.fsync`` is made to fail, for the paths a test names."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fluss_py import config as cfg
from fluss_py.errors import StorageError
from fluss_py.log.dirs import DirFailure, LogDirs
from fluss_py.log.disk_io import FsyncFailed, append_or_nothing, fsync_failure_in
from fluss_py.replica import log_flush
from fluss_py.types import TableBucket

from .helpers import batch, disk_fills_up

A, B = TableBucket(1, 0), TableBucket(1, 1)
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _dirs(tmp_path: Path) -> LogDirs:
    dirs = LogDirs([tmp_path / "d0", tmp_path / "d1"], cfg.load_config(cfg.TABLET, None, {}))
    dirs.load_logs()
    return dirs


def _failing_fsync(monkeypatch: pytest.MonkeyPatch, wanted: Callable[[str], bool], code: int = errno.ENOSPC) -> None:
    """``os.fsync`` fails with ``code`` on the files and directories whose path ``wanted`` accepts."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if wanted(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(code, os.strerror(code))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_fsync_failed_keeps_the_errno_and_is_found_through_wrappers() -> None:
    error = FsyncFailed(errno.ENOSPC, "fsync failed: No space left on device")
    try:
        try:
            raise error
        except OSError as e:
            raise StorageError("flush failed") from e
    except StorageError as wrapped:
        assert fsync_failure_in(wrapped) and not fsync_failure_in(StorageError("x"))
        failure = DirFailure.of(Path("/d"), wrapped)
    assert (failure.code, failure.reason) == ("ENOSPC", "fsync failed: No space left on device")
    assert failure.fsync_failed and not failure.recoverable
    assert DirFailure.of(Path("/d"), ENOSPC).recoverable  # a write that found the disk full


@pytest.mark.parametrize(
    "target",
    [".log", ".index", ".timeindex", "leader-epoch-checkpoint", "/1-0", "/d0"],
    ids=["segment", "index", "time-index", "epoch-checkpoint", "bucket-dir", "data-dir"],
)
def test_a_failed_fsync_of_any_file_of_a_flush_takes_the_dir_offline_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """ENOSPC from fsync is not a full disk that comes back: the periodic flush (off the loop) fails, the dir
    goes offline, and no amount of free space brings it back while the process lives."""
    dirs = _dirs(tmp_path)
    dirs.get_or_create(A).append_as_leader(batch(2), 1)  # d0: a new log, its dir and the data dir to sync
    dirs.get_or_create(B).append_as_leader(batch(2), 1)  # d1
    _failing_fsync(monkeypatch, lambda p: p.endswith(target) and "/d0" in p)
    asyncio.run(log_flush.flush_all(dirs))
    failure = dirs.offline[tmp_path / "d0"]
    assert failure.code == "ENOSPC" and failure.fsync_failed and not failure.recoverable
    assert failure.reason == "fsync failed: No space left on device"
    assert dirs.get(A) is None and dirs.get(B).recovery_point == 2  # the other dir was flushed
    monkeypatch.undo()
    assert dirs.try_recover(0) == []  # free space changes nothing: no reload from the same files
    assert tmp_path / "d0" in dirs.offline
    dirs.shutdown()
    assert not (tmp_path / "d0" / ".fluss_cleanshutdown").exists()  # the next start checks it as after a crash


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint.tmp", "/d0"], ids=["checkpoint", "its-dir"])
def test_a_failed_fsync_of_an_offset_checkpoint_takes_the_dir_offline_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    dirs = _dirs(tmp_path)
    dirs.get_or_create(A).append_as_leader(batch(2), 1)
    _failing_fsync(monkeypatch, lambda p: p.endswith(name) and "/d0" in p)
    asyncio.run(log_flush.checkpoint(dirs))
    failure = dirs.offline[tmp_path / "d0"]
    assert failure.fsync_failed and not failure.recoverable
    monkeypatch.undo()
    assert dirs.try_recover(0) == []
    dirs.shutdown()


def test_a_synchronous_flush_that_fails_its_fsync_takes_the_dir_offline_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = _dirs(tmp_path)
    log = dirs.get_or_create(A)
    log.append_as_leader(batch(2), 1)
    _failing_fsync(monkeypatch, lambda p: p.endswith(".log"), errno.EIO)
    with pytest.raises(StorageError, match="fsync failed"):
        log.flush()
    assert log.recovery_point == 0 and not dirs.offline[tmp_path / "d0"].recoverable


def test_a_failed_fsync_reported_while_the_dir_is_offline_for_a_full_disk_keeps_it_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of fsyncgate: a flush job syncs in its thread; meanwhile an append finds the disk full and the
    dir goes offline (its logs closed); then the job's fsync fails. The closed log still reports it, and the
    full dir, which would have come back once space was freed, stays offline."""
    dirs = _dirs(tmp_path)
    log = dirs.get_or_create(A)
    log.append_as_leader(batch(2), 1)
    job = log.begin_flush()
    assert job is not None
    dirs.fail(tmp_path / "d0", ENOSPC)  # an append's write found the disk full
    assert log.closed and dirs.offline[tmp_path / "d0"].recoverable
    _failing_fsync(monkeypatch, lambda p: True)
    with pytest.raises(StorageError):
        job.sync()
    job.close()
    job.report_failure()  # on the loop, after the thread
    failure = dirs.offline[tmp_path / "d0"]
    assert failure.fsync_failed and not failure.recoverable
    monkeypatch.undo()
    assert dirs.try_recover(0) == []


def test_a_failed_append_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"kept")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        disk_fills_up(monkeypatch, first=3)
        with pytest.raises(OSError) as failed:
            append_or_nothing(fd, b"0123456789", 4)
        monkeypatch.undo()
        assert failed.value.errno == errno.ENOSPC
    finally:
        os.close(fd)
    assert path.read_bytes() == b"kept"


def test_a_full_disk_whose_writes_failed_comes_back_with_what_was_written_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No fsync failed: the failed append and the failed index tail were cut back, so the reload (from the
    page cache, as after a crash) finds exactly the batches acknowledged before, and the dir returns."""
    dirs = _dirs(tmp_path)
    log = dirs.get_or_create(A)
    log.append_as_leader(batch(2), 1)
    size = log.segments[-1].size
    disk_fills_up(monkeypatch, first=3)
    with pytest.raises(StorageError, match="No space left on device"):
        log.append_as_leader(batch(2), 1)
    monkeypatch.undo()
    failure = dirs.offline[tmp_path / "d0"]
    assert failure.recoverable and not failure.fsync_failed
    assert os.path.getsize(log.segments[-1].log_path) == size
    assert [p for p, _ in dirs.try_recover(0)] == [tmp_path / "d0"]
    assert dirs.get(A).log_end_offset == 2
    dirs.shutdown()


def test_a_failed_index_tail_write_is_cut_back_and_stays_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = _dirs(tmp_path)
    log = dirs.get_or_create(A)
    for _ in range(3):
        log.append_as_leader(batch(2, size=3000), 1)  # an index entry per 4 KiB of log
    index = log.segments[-1].offset_index
    index.flush(fsync=False)
    written = index.path.read_bytes()
    log.append_as_leader(batch(2, size=5000), 1)
    disk_fills_up(monkeypatch, first=3)
    with pytest.raises(OSError):
        index.flush(fsync=False)
    monkeypatch.undo()
    assert index.path.read_bytes() == written  # no torn entry
    index.flush(fsync=False)
    assert len(index.path.read_bytes()) > len(written) and len(index.path.read_bytes()) % 8 == 0
    dirs.shutdown()
