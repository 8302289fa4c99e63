"""Flushing with the fsyncs off the event loop (docs/storage.md §7): the recovery point never covers bytes that
were not synced — writes and truncations during the sync, cancellation — and the loop keeps running while
the disk syncs. Real files in a temp dir; only the slow-disk test replaces ``os.fsync``."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from fluss_py.config import Config
from fluss_py.errors import StorageError
from fluss_py.log import LogManager
from fluss_py.replica import log_flush
from fluss_py.types import TableBucket
from tests.unit.log.helpers import batch, open_log

TB1, TB2 = TableBucket(1, 0), TableBucket(1, 1)


def manager(d: Path) -> LogManager:
    return LogManager(d, Config("tablet-server", {"log.segment.file-size": "2kb", "log.index.interval-size": 128}))


def one_unflushed_log(d: Path):
    m = manager(d)
    t = m.get_or_create(TB1)
    t.append_as_leader(batch(3), 0)
    return m, t


def sync_now(job) -> None:
    try:
        job.sync()
    finally:
        job.close()


def test_begin_and_end_move_the_recovery_point_to_the_target(tmp_path: Path) -> None:
    t = open_log(tmp_path)
    for _ in range(6):  # several segments
        t.append_as_leader(batch(4, size=200), 0)
    assert t.recovery_point == 0 and len(t.segments) > 1
    job = t.begin_flush()
    # per segment its log and two indexes; the epoch cache file and its directory (written, not yet synced);
    # the directory again for its new segment files' entries
    assert job is not None and job.target == t.log_end_offset and len(job.descriptors) == 3 * len(t.segments) + 3
    sync_now(job)
    t.end_flush(job)
    assert t.recovery_point == t.log_end_offset
    assert not any(s.dirty for s in t.segments)
    assert t.begin_flush() is None  # nothing new


def test_a_write_during_the_sync_keeps_its_segment_dirty(tmp_path: Path) -> None:
    t = open_log(tmp_path)
    t.append_as_leader(batch(2), 0)
    job = t.begin_flush()
    target = job.target
    t.append_as_leader(batch(2), 0)  # lands after the descriptors were taken: not covered by this sync
    sync_now(job)
    t.end_flush(job)
    assert t.recovery_point == target < t.log_end_offset
    assert t.segments[-1].dirty
    again = t.begin_flush()
    assert again is not None
    sync_now(again)
    t.end_flush(again)
    assert t.recovery_point == t.log_end_offset and not t.segments[-1].dirty


def test_a_truncation_during_the_sync_moves_no_recovery_point(tmp_path: Path) -> None:
    t = open_log(tmp_path)
    t.append_as_leader(batch(4), 0)
    t.flush()
    rp = t.recovery_point
    t.append_as_leader(batch(4), 0)
    job = t.begin_flush()
    t.truncate_to(rp + 1)  # the tail the sync was for is gone...
    t.append_as_leader(batch(4), 1)  # ...and replaced by data the sync never saw
    sync_now(job)
    t.end_flush(job)
    assert t.recovery_point == rp  # not job.target: offsets below it now hold unsynced bytes


async def test_flush_all_off_the_loop_syncs_every_log_and_checkpoints_see_it(tmp_path: Path) -> None:
    m = manager(tmp_path)
    for tb in (TB1, TB2):
        m.get_or_create(tb).append_as_leader(batch(3), 0)
    await log_flush.flush_all(m)
    assert {tb: m.get(tb).recovery_point for tb in (TB1, TB2)} == {TB1: 3, TB2: 3}
    m.checkpoint()
    assert m.recovery_checkpoint.read() == {TB1: 3, TB2: 3}
    await log_flush.flush_all(m)  # nothing new: no job, no thread


async def test_the_loop_keeps_running_while_the_disk_syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m, _ = one_unflushed_log(tmp_path)
    real_fsync = os.fsync
    threads: set[int] = set()

    def slow_fsync(fd: int) -> None:
        threads.add(threading.get_ident())
        time.sleep(0.05)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ticker())
    try:
        await log_flush.flush_all(m)  # 3 descriptors x 50 ms
    finally:
        task.cancel()
    assert threading.get_ident() not in threads
    assert ticks >= 10, f"the loop ticked {ticks} times during 150 ms of fsync"
    assert m.get(TB1).recovery_point == 3


async def test_a_cancelled_flush_waits_for_its_thread_and_moves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, t = one_unflushed_log(tmp_path)
    release = threading.Event()
    done = threading.Event()
    real_fsync = os.fsync

    def blocked_fsync(fd: int) -> None:
        release.wait(5)
        real_fsync(fd)
        done.set()

    monkeypatch.setattr(os, "fsync", blocked_fsync)
    flush = asyncio.create_task(log_flush.flush_all(m))
    await asyncio.sleep(0.02)
    flush.cancel()
    await asyncio.sleep(0.02)
    assert not flush.done(), "a cancelled flush must wait for its thread"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await flush
    assert done.is_set() and t.recovery_point == 0 and t.segments[-1].dirty


async def test_a_failed_sync_raises_a_storage_error_and_moves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, t = one_unflushed_log(tmp_path)

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(StorageError, match="flush failed"):
        await log_flush.flush_all(m)
    assert t.recovery_point == 0 and t.segments[-1].dirty


async def test_checkpoints_are_written_off_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The once-a-second offset checkpoints (three files, each fsynced twice) no longer stall the loop."""
    m, _ = one_unflushed_log(tmp_path)
    await log_flush.flush_all(m)
    real_fsync = os.fsync
    threads: set[int] = set()

    def recording_fsync(fd: int) -> None:
        threads.add(threading.get_ident())
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    await log_flush.checkpoint(m)
    assert threads and threading.get_ident() not in threads
    assert m.recovery_checkpoint.read() == {TB1: 3} and m.hw_checkpoint.read() == {TB1: 0}


async def test_an_older_checkpoint_snapshot_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    """A synchronous checkpoint (delete, set-aside, shutdown) taken while the thread still writes an older
    snapshot wins: the file never goes back."""
    m, t = one_unflushed_log(tmp_path)
    old = m.checkpoint_snapshot()
    await log_flush.flush_all(m)
    m.checkpoint()  # newer: recovery point 3
    m.write_checkpoints(old)  # the thread's older snapshot (recovery point 0) comes late
    assert m.recovery_checkpoint.read() == {TB1: 3}
    assert t.recovery_point == 3
