"""The power-cut filesystem (fluss_py/testing/powercut_fs.py) in a real FUSE mount: POSIX file operations the
log uses behave as on a disk, and a power cut keeps exactly what was fsynced."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluss_py.log.checkpoint import write_atomic
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
