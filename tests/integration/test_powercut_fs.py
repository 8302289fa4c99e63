"""The power-cut filesystem (fluss_py/testing/powercut_fs.py) in a real FUSE mount: POSIX file operations the
log uses behave as on a disk, and a power cut keeps exactly what was fsynced."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluss_py.log.checkpoint import write_atomic
from fluss_py.log.disk_io import rewrite_in_place
from fluss_py.testing.powercut import PowerCutFs, unavailable_reason

pytestmark = pytest.mark.integration


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[PowerCutFs]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no FUSE filesystem: {reason}")
    mounted = PowerCutFs(tmp_path / "mnt").mount()
    try:
        yield mounted
    finally:
        mounted.close()
    assert not os.path.ismount(tmp_path / "mnt")


def test_file_operations_of_the_log(fs: PowerCutFs) -> None:
    d = fs.mountpoint / "1-0"
    d.mkdir()
    fd = os.open(d / "0.log", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, b"hello")
        os.pwrite(fd, b" world", 0)  # O_APPEND: appended whatever the offset
        assert os.pread(fd, 100, 0) == b"hello world" and os.fstat(fd).st_size == 11
        os.ftruncate(fd, 5)
        os.write(fd, b"!")
        assert os.pread(fd, 100, 0) == b"hello!"
        dup = os.dup(fd)
        os.fdatasync(dup)
        os.close(dup)
    finally:
        os.close(fd)
    write_atomic(d / "checkpoint", b"0\n0\n")  # temp file + fsync + rename + fsync(dir)
    (d / "stale.tmp").write_bytes(b"x")
    os.unlink(d / "stale.tmp")
    assert sorted(os.listdir(d)) == ["0.log", "checkpoint"]
    os.rename(d, fs.mountpoint / "1-0-delete")
    shutil.rmtree(fs.mountpoint / "1-0-delete")
    assert os.listdir(fs.mountpoint) == []


def test_a_power_cut_keeps_exactly_what_was_fsynced(fs: PowerCutFs) -> None:
    synced, unsynced, grown = (fs.mountpoint / n for n in ("synced", "unsynced", "grown"))
    write_atomic(synced, b"durable")
    unsynced.write_bytes(b"gone")
    with open(grown, "wb") as f:
        f.write(b"kept")
        f.flush()
        os.fsync(f.fileno())
        f.write(b"+lost")
    files, dropped = fs.power_cut()
    assert (files, dropped) == (2, len(b"gone") + len(b"+lost"))
    assert synced.read_bytes() == b"durable"
    assert unsynced.exists() and unsynced.read_bytes() == b""  # the name was durable at once, not the bytes
    assert grown.read_bytes() == b"kept" and grown.stat().st_size == 4
    assert fs.power_cut() == (0, 0)


def test_an_armed_write_fails_and_changes_nothing(fs: PowerCutFs) -> None:
    """``fail_write``: the next writes of the matching files fail with the errno (a disk full or failing when
    the write reaches it), nothing of them lands; other files and later writes are not affected."""
    wal, other = fs.mountpoint / "kv" / "000008.log", fs.mountpoint / "seg.log"
    wal.parent.mkdir()
    fs.fail_write("EIO", "kv/*.log", count=2)
    fd, od = os.open(wal, os.O_WRONLY | os.O_CREAT | os.O_APPEND), os.open(other, os.O_WRONLY | os.O_CREAT)
    try:
        for _ in range(2):
            with pytest.raises(OSError) as failed:
                os.write(fd, b"lost")
            assert failed.value.errno == errno.EIO
        assert os.write(od, b"kept") == 4 and fs.pending() == 0
        assert wal.read_bytes() == b""
        assert os.write(fd, b"after") == 5  # the fault is used up
    finally:
        os.close(fd)
        os.close(od)
    assert wal.read_bytes() == b"after" and other.read_bytes() == b"kept"


def test_a_failed_fsync_leaves_its_pages_readable_but_never_written(fs: PowerCutFs) -> None:
    """fsyncgate as Linux has it: the failed fsync reports the error once, the pages it could not write stay
    readable (clean) in the page cache, the next fsync succeeds without them; after a power cut they read as
    zeros below what that fsync covered. Only the matching file is affected."""
    seg, other = fs.mountpoint / "seg.log", fs.mountpoint / "other.log"
    a, b, c = b"a" * 5000, b"b" * 9000, b"c" * 7000
    with open(seg, "wb") as f, open(other, "wb") as g:
        f.write(a)
        f.flush()
        os.fsync(f.fileno())
        fs.fail_fsync("ENOSPC", "*seg.log")
        f.write(b)
        f.flush()
        g.write(b"kept")
        g.flush()
        with pytest.raises(OSError) as failed:
            os.fsync(f.fileno())
        assert failed.value.errno == errno.ENOSPC and fs.pending() == 0
        os.fsync(g.fileno())
        assert seg.read_bytes() == a + b  # still readable: a reload would find these bytes good
        f.write(c)
        f.flush()
        os.fsync(f.fileno())  # succeeds: writes the size and the pages dirtied since, not b's clean ones
    fs.power_cut()
    after = seg.read_bytes()
    assert len(after) == len(a + b + c) and after[: len(a)] == a and after[-len(c) :] == c
    page = 4096
    lost = range(-(-len(a) // page) * page, (len(a + b) // page) * page)  # b's whole pages: never written
    assert after[lost.start : lost.stop] == bytes(len(lost)) and len(lost) > 0
    assert other.read_bytes() == b"kept"


def test_a_lost_fsync_reports_success_and_writes_nothing(fs: PowerCutFs) -> None:
    path = fs.mountpoint / "x.log"
    fs.lose_fsync("*.log", count=1)
    with open(path, "wb") as f:
        f.write(b"lost")
        f.flush()
        os.fsync(f.fileno())  # no error
        assert fs.pending() == 0
    assert path.read_bytes() == b"lost"
    fs.power_cut()
    assert path.read_bytes() == b""


def test_pages_a_failed_fsync_left_clean_reach_the_disk_once_written_again(fs: PowerCutFs) -> None:
    """What an unclean start does to the bytes above the recovery point (``rewrite_in_place``): written again
    with what a read returns, they are dirty, and the next fsync writes them."""
    seg = fs.mountpoint / "seg.log"
    a, b = b"a" * 5000, b"b" * 9000
    with open(seg, "wb") as f:
        f.write(a)
        f.flush()
        os.fsync(f.fileno())
        f.write(b)
        f.flush()
        fs.fail_fsync("EIO", "seg.log")
        with pytest.raises(OSError):
            os.fsync(f.fileno())
    rewrite_in_place(seg, len(a), len(a + b))  # the restarted process, before its first flush
    fd = os.open(seg, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fs.power_cut()
    assert seg.read_bytes() == a + b
