"""Shared helpers for log tests: batch factories and a tablet opener."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from fluss_py.log import LogConfig, LogTablet
from fluss_py.record import CompressionType, RecordBatchBuilder
from fluss_py.types import TableBucket

TB = TableBucket(1, 0)
SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=128, max_batch_bytes=4096)


def batch(
    n: int = 2,
    *,
    ts: int = 1_000,
    size: int = 20,
    writer_id: int = -1,
    writer_epoch: int = -1,
    seq: int = -1,
    compression: CompressionType = CompressionType.NONE,
    tag: bytes = b"v",
) -> bytes:
    b = RecordBatchBuilder(
        writer_id=writer_id, writer_epoch=writer_epoch, base_sequence=seq, compression=compression, max_bytes=1 << 24
    )
    for i in range(n):
        b.append(tag + b"%d" % i + b"." * size, key=b"k%d" % i, timestamp_ms=ts + i)
    return b.build()


def open_log(path: Path, config: LogConfig = SMALL, **kw) -> LogTablet:
    return LogTablet.open(path, TB, config, **kw)


def synced_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``os.fsync`` is called on from now (resolved from the descriptors)."""
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def disk_fills_up(monkeypatch: pytest.MonkeyPatch, first: int = 10) -> None:
    """From now on the disk fills up during a write: the first ``os.write`` writes ``first`` bytes (a short
    write), every later one fails with ENOSPC, as the kernel does."""
    real, calls = os.write, []

    def filling(fd: int, data) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[:first]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", filling)
