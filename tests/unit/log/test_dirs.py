"""LogDirs (docs/storage.md §10): placement over several data dirs, the lock, failure and recovery of a dir."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from fluss_py import config as cfg
from fluss_py.errors import StorageError
from fluss_py.log.dirs import DirFailure, LogDirs, data_dirs_of
from fluss_py.types import TableBucket

from .helpers import batch


def _config(**extra: str) -> cfg.Config:
    return cfg.load_config(cfg.TABLET, None, {"log.segment.file-size": "4KB", **extra})


def _dirs(tmp_path: Path, n: int = 2) -> LogDirs:
    dirs = LogDirs([tmp_path / f"d{i}" for i in range(n)], _config())
    dirs.load_logs()
    return dirs


def test_data_dirs_default_to_data_dir_and_refuse_duplicates(tmp_path: Path) -> None:
    assert data_dirs_of(_config(**{"data.dir": str(tmp_path / "x")})) == [tmp_path / "x"]
    both = _config(**{"data.dirs": f"{tmp_path}/a,{tmp_path}/b"})
    assert data_dirs_of(both) == [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(StorageError, match="twice"):
        data_dirs_of(_config(**{"data.dirs": f"{tmp_path}/a,{tmp_path}/a"}))


def test_new_buckets_go_to_the_dir_with_fewest_logs(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    for b in range(4):
        dirs.get_or_create(TableBucket(1, b))
    assert dirs.log_counts() == {tmp_path / "d0": 2, tmp_path / "d1": 2}
    assert dirs.dir_of(TableBucket(1, 1)) == tmp_path / "d1"
    for b in range(3):  # the fourth stays empty: nothing on disk (docs/storage.md §3 "Empty until written")
        dirs.get_or_create(TableBucket(1, b)).append_as_leader(batch(1), 0)
    assert (tmp_path / "d1" / "1-1").is_dir() and not (tmp_path / "d1" / "1-3").exists()
    dirs.shutdown()
    again = LogDirs([tmp_path / "d0", tmp_path / "d1"], _config())
    assert set(again.load_logs()) == {TableBucket(1, b) for b in range(3)}
    assert again.had_clean_shutdown
    again.shutdown()


def test_a_locked_dir_refuses_a_second_owner(tmp_path: Path) -> None:
    first = _dirs(tmp_path, 1)
    with pytest.raises(StorageError, match="locked by another process"):
        LogDirs([tmp_path / "d0"], _config()).load_logs()
    first.shutdown()
    LogDirs([tmp_path / "d0"], _config()).load_logs()  # released at shutdown


def test_a_failed_dir_goes_offline_once_and_the_other_serves(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    a, b = TableBucket(1, 0), TableBucket(1, 1)
    la, lb = dirs.get_or_create(a), dirs.get_or_create(b)
    seen: list[DirFailure] = []
    dirs.listeners.append(seen.append)
    error = OSError(errno.EIO, "Input/output error")
    la.io_error(la, StorageError("write failed"))  # the hook a failing LogTablet call reports through
    dirs.fail(tmp_path / "d0", error)  # a second report of the same dir changes nothing
    assert [f.code for f in seen] == ["EIO"] and seen[0].buckets == (a,)
    assert set(dirs.offline) == {tmp_path / "d0"} and not seen[0].recoverable
    assert dirs.get(a) is None and dirs.get(b) is lb
    with pytest.raises(StorageError, match="offline"):
        dirs.get_or_create(a)
    assert dirs.dir_of(dirs.get_or_create(TableBucket(1, 2)).table_bucket) == tmp_path / "d1"
    lb.append_as_leader(batch(2), 1)
    dirs.checkpoint()  # only the online dir is written
    assert dirs.try_recover(0) == []  # EIO: only a restart brings it back
    dirs.shutdown()
    assert not (tmp_path / "d0" / ".fluss_cleanshutdown").exists()
    assert (tmp_path / "d1" / ".fluss_cleanshutdown").exists()


def test_a_full_dir_comes_back_when_space_is_free(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    a = TableBucket(1, 0)
    dirs.get_or_create(a).append_as_leader(batch(2), 1)
    dirs.fail(tmp_path / "d0", OSError(errno.ENOSPC, "No space left on device"))
    failure = dirs.offline[tmp_path / "d0"]
    assert failure.recoverable and failure.reason == "No space left on device"
    assert dirs.try_recover(1 << 62) == []  # not enough free space yet
    assert dirs.try_recover(0) == [(tmp_path / "d0", [a])]
    assert dirs.get(a).log_end_offset == 2 and not dirs.offline
    dirs.shutdown()


def test_an_unwritten_log_of_a_failed_dir_is_created_there_again_after_its_return(tmp_path: Path) -> None:
    """It had nothing on disk, so the reload does not find it; asked for again (the coordinator's roles after
    REPLICA_RECOVERED) it is a new empty log in the same directory, where its empty directory used to be."""
    dirs = _dirs(tmp_path)
    a, b = TableBucket(1, 0), TableBucket(1, 1)
    dirs.get_or_create(a).append_as_leader(batch(2), 1)
    dirs.get_or_create(b)  # placed in d1, never written
    dirs.get_or_create(TableBucket(1, 2))  # d0
    unwritten = TableBucket(1, 3)
    dirs.get_or_create(unwritten)
    assert dirs.dir_of(unwritten) == tmp_path / "d1" and not (tmp_path / "d1" / "1-3").exists()
    dirs.fail(tmp_path / "d1", OSError(errno.ENOSPC, "No space left on device"))
    assert dirs.try_recover(0) == [(tmp_path / "d1", [])]
    log = dirs.get_or_create(unwritten)
    assert dirs.dir_of(unwritten) == tmp_path / "d1" and log.log_end_offset == 0
    log.append_as_leader(batch(1), 2)
    assert (tmp_path / "d1" / "1-3").is_dir() and not dirs.offline
    dirs.shutdown()


def test_a_bucket_that_cannot_be_loaded_takes_its_dir_offline_not_the_server(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    for b in range(4):
        dirs.get_or_create(TableBucket(1, b)).append_as_leader(batch(1), 0)
    dirs.shutdown()
    bad = dirs.dir_of(TableBucket(1, 0))
    (bad / "1-0" / "0000000000000000007.log").write_bytes(b"x")  # 19 digits: maybe a renamed segment

    again = LogDirs([tmp_path / "d0", tmp_path / "d1"], _config())
    logs = again.load_logs()
    assert set(logs) == {tb for tb in map(lambda b: TableBucket(1, b), range(4)) if dirs.dir_of(tb) != bad}
    failure = again.offline[bad]
    assert failure.code == "LOG_CORRUPTED" and "0000000000000000007.log" in failure.reason
    assert not failure.recoverable
    again.shutdown()
