"""Real disk faults for fault tests (root only): a full filesystem and a filesystem whose I/O fails.

- ``tmpfs(path, size)``: mount a small tmpfs at ``path``; ``fill(path)`` then writes a filler file until the
  kernel answers ENOSPC (a real full disk; ``free(path)`` deletes the filler).
- ``ext4_image(path, size)``: a fresh ext4 filesystem in an image file, loop-mounted at ``path``;
  ``shut_down(path)`` issues ``EXT4_IOC_SHUTDOWN`` (what ``xfs_io -c shutdown`` and fstests' "godown" do):
  from then on every read, write and fsync on that filesystem fails with EIO, as on a dying disk.

Each context manager unmounts by path in its ``finally`` (lazily: a server killed later may still hold files
there). ``mounts_available()`` says whether this process may mount (tests skip otherwise).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2  # drop the journal: nothing more reaches the disk
FILLER = "filler"


def mounts_available() -> bool:
    return os.geteuid() == 0 and Path("/proc/filesystems").read_text().find("tmpfs") >= 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        _umount(path)


def fill(path: Path, chunk: int = 64 * 1024) -> int:
    """Write ``<path>/filler`` until ENOSPC; returns its size. Smaller writes at the end leave no byte free."""
    written = 0
    fd = os.open(path / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while chunk >= 1:
            try:
                written += os.write(fd, b"\0" * chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    finally:
        os.close(fd)
    return written


def free(path: Path) -> None:
    (path / FILLER).unlink(missing_ok=True)


@contextlib.contextmanager
def ext4_image(path: Path, size_mb: int = 64) -> Iterator[Path]:
    image = path.with_name(path.name + ".img")
    image.parent.mkdir(parents=True, exist_ok=True)
    with open(image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(path)], check=True)
    try:
        yield path
    finally:
        _umount(path)
        image.unlink(missing_ok=True)


def shut_down(path: Path) -> None:
    """Every later I/O on the ext4 filesystem mounted at ``path`` fails with EIO."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
    finally:
        os.close(fd)
