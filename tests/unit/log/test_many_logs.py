"""Thousands of logs on one server (docs/storage.md §12): segment descriptors stay under a bound (least
recently used closed first, reopened on use, nothing lost); a flush round of many dirty logs holds a bounded
number of descriptors; idle logs cost the flush and checkpoint rounds nothing. Real files in a temp dir."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from fluss_py.config import Config
from fluss_py.log import LogManager
from fluss_py.log import manager as manager_module
from fluss_py.log.open_files import OpenFiles
from fluss_py.log.segment import BatchMeta, LogSegment
from fluss_py.log.tablet import LogTablet
from fluss_py.replica import log_flush  # the runner of the flush and checkpoint rounds
from fluss_py.types import TableBucket

from .helpers import batch, synced_paths


def manager(d: Path) -> LogManager:
    return LogManager(d, Config("tablet-server", {}))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_segments_beyond_the_bound_are_closed_and_reopened_on_use(tmp_path: Path) -> None:
    files = OpenFiles(capacity=4)
    before = open_fds()
    for i in range(12):
        (tmp_path / f"s{i}").mkdir()
    segments = [LogSegment(tmp_path / f"s{i}", 0, 4096, files) for i in range(12)]
    assert len(files) == 4 and open_fds() - before <= 4
    for i, seg in enumerate(segments):
        seg.append(b"x" * (i + 1), [BatchMeta(0, i + 1, 0, 0, 0)])  # raw bytes: what matters is where they go
        assert len(files) <= 4
    assert files.evicted >= 8
    for i, seg in enumerate(segments):  # every write is there, read through a reopened descriptor
        assert seg.read(0, 100) == b"x" * (i + 1)
        assert seg.size == i + 1
    assert open_fds() - before <= 4
    for seg in segments:
        seg.close_without_flush()
    assert len(files) == 0 and open_fds() == before


def test_a_closed_segment_stays_closed(tmp_path: Path) -> None:
    files = OpenFiles(capacity=2)
    seg = LogSegment(tmp_path, 0, 4096, files)
    seg.close_without_flush()
    with pytest.raises(OSError):
        seg.read(0, 1)
    assert len(files) == 0


def test_a_scan_survives_its_descriptor_being_evicted_between_two_batches(tmp_path: Path) -> None:
    files = OpenFiles(capacity=1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = LogTablet.open(tmp_path / "a", TableBucket(1, 0), manager(tmp_path / "m").default_log_config())
    for _ in range(3):
        a.append_as_leader(batch(2), 0)
    seg = a.segments[-1]
    seg._files = files  # this segment alone under a bound of one descriptor
    seg.evict()
    other = LogSegment(tmp_path / "b", 0, 4096, files)
    scanned = []
    for _, h, _ in seg.scan(0, verify=False):
        scanned.append(h[0])
        other.read(0, 1)  # takes the only slot: the scan's next read reopens its own file
    assert scanned == [0, 2, 4]


def test_a_flush_round_of_many_dirty_logs_holds_few_descriptors_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manager_module, "FLUSH_ROUND_DESCRIPTORS", 30)
    held: list[int] = []
    real = manager_module.sync_and_close

    def counting(jobs):  # the descriptors one round holds open at once
        held.append(sum(len(j.descriptors) for j in jobs))
        real(jobs)

    monkeypatch.setattr(log_flush, "sync_and_close", counting)
    m = manager(tmp_path)
    logs = [m.get_or_create(TableBucket(1, b)) for b in range(50)]
    for t in logs:
        t.append_as_leader(batch(1), 0)
    asyncio.run(log_flush.flush_all(m))
    # per log: its segment, two indexes, the epoch cache file and its directory, and for its first write the
    # new directory's entry in the data dir and the segment file's in the log's directory
    assert sum(held) == 7 * 50
    assert max(held) <= 30 + 7
    assert all(t.recovery_point == t.log_end_offset == 1 for t in logs)


def test_idle_logs_cost_the_flush_and_checkpoint_rounds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = manager(tmp_path)
    logs = [m.get_or_create(TableBucket(1, b)) for b in range(20)]
    logs[3].append_as_leader(batch(2), 0)

    async def round_() -> None:
        await log_flush.flush_all(m)
        await log_flush.checkpoint(m)

    asyncio.run(round_())
    assert m.recovery_checkpoint.read()[TableBucket(1, 3)] == 2
    visited: list[TableBucket] = []
    real_begin = LogTablet.begin_flush

    def begin(self: LogTablet):
        visited.append(self.table_bucket)
        return real_begin(self)

    monkeypatch.setattr(LogTablet, "begin_flush", begin)
    writes: list[int] = []
    real_write = type(m.hw_checkpoint).write
    monkeypatch.setattr(type(m.hw_checkpoint), "write", lambda cp, *a, **k: writes.append(1) or real_write(cp, *a, **k))
    asyncio.run(round_())  # the recovery point moved in the last round: that log's entry is written once more
    visited.clear()
    writes.clear()
    asyncio.run(round_())
    assert visited == [] and writes == []  # idle: no log visited, no file written
    logs[7].append_as_leader(batch(1), 0)
    logs[7].update_high_watermark(1)
    asyncio.run(round_())
    assert visited == [TableBucket(1, 7)]
    hws = m.hw_checkpoint.read()
    assert len(hws) == 2 and hws[TableBucket(1, 7)] == 1 and hws[TableBucket(1, 3)] == 0  # the written logs
    assert m.recovery_checkpoint.read()[TableBucket(1, 7)] == 1
    m.delete(TableBucket(1, 7))
    asyncio.run(round_())
    assert TableBucket(1, 7) not in m.hw_checkpoint.read() and len(m.hw_checkpoint.read()) == 1


def test_a_new_leader_epoch_costs_no_fsync_until_its_batches_are_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = manager(tmp_path)
    t = m.get_or_create(TableBucket(1, 0))
    synced = synced_paths(monkeypatch)
    t.epoch_cache.assign(3, 0, write=False)  # what becoming leader does, thousands of times at a table's creation
    t.append_as_leader(batch(2), 3)
    assert synced == []
    assert (t.dir / "leader-epoch-checkpoint").read_text().splitlines()[2] == "3 0"  # written with the batch
    asyncio.run(log_flush.flush_all(m))
    epoch_file = str(t.dir / "leader-epoch-checkpoint")
    assert epoch_file in synced and str(t.dir) in synced  # synced with the batches, before the recovery point
    assert t.recovery_point == 2
    synced.clear()
    t.append_as_leader(batch(1), 3)
    t.flush()  # the synchronous flush (close, tools): nothing new in the epoch cache, not synced again
    assert epoch_file not in synced
    t.epoch_cache.assign(4, 3)
    t.append_as_leader(batch(1), 4)
    t.flush()
    assert epoch_file in synced


def test_an_empty_log_reopens_without_recovery(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = manager(tmp_path)
    m.get_or_create(TableBucket(1, 0)).truncate_fully_and_start_at(0)  # an empty .log file, no index files
    m.shutdown()
    again = manager(tmp_path)
    with caplog.at_level("WARNING"):
        again.load_logs()
    t = again.logs[TableBucket(1, 0)]
    assert t.log_end_offset == 0 and not t.segments[-1].dirty
    assert [r.getMessage() for r in caplog.records] == []  # before: "index: missing; rebuilding the index"
