"""The log layer's byte counters (O(1) reads for the liveness report and the console's disk use): a log's
``size_in_bytes`` and a data dir's ``held_bytes`` always equal a recount of the segment files on disk, after
appends, rolls, truncations, retention, resets, corruption repairs, deletions and directory failures."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from fluss_py import config as cfg
from fluss_py.log import LogConfig
from fluss_py.log.dirs import LogDirs
from fluss_py.log.manager import LogManager
from fluss_py.log.tablet import LogTablet
from fluss_py.types import TableBucket

from .helpers import SMALL, batch, open_log


def _on_disk(log_dir: Path) -> int:
    """Bytes of the ``.log`` segment files under ``log_dir`` (one bucket dir, or a data dir of them)."""
    return sum(p.stat().st_size for p in log_dir.rglob("*.log") if "-delete" not in p.parent.name)


def _recount(t: LogTablet) -> bool:
    return t.size_in_bytes == sum(s.size for s in t.segments) == _on_disk(t.dir)


def test_a_logs_size_is_exact_after_every_kind_of_change(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    assert t.size_in_bytes == 0 and _recount(t)
    for i in range(40):  # 2 KiB segments: several rolls
        t.append_as_leader(batch(3, ts=1_000 + i), 0)
        assert _recount(t)
    assert len(t.segments) > 3
    t.roll()
    assert _recount(t)
    t.truncate_to(50)  # into an earlier segment: later segments deleted, one cut
    assert _recount(t) and t.log_end_offset <= 50
    t.update_high_watermark(t.log_end_offset)
    t.config = LogConfig(segment_bytes=2048, index_interval_bytes=128, max_batch_bytes=4096, retention_bytes=100)
    assert t.apply_retention(10_000) > 0 and _recount(t)
    seg = t.segments[-1]
    t.mark_corrupt(t.log_end_offset - 3, seg.base_offset, seg.position_of(t.log_end_offset - 3))
    t.truncate_at_corruption()
    assert _recount(t)
    t.truncate_fully_and_start_at(500)
    assert t.size_in_bytes == 0 and _recount(t)
    t.append_as_leader(batch(2), 0)
    t.close()
    again = open_log(tmp_path / "1-0")
    assert again.size_in_bytes == t.size_in_bytes and _recount(again)


def test_a_managers_held_bytes_is_the_sum_of_its_logs_through_creates_deletes_and_a_failed_dir(tmp_path: Path):
    lm = LogManager(tmp_path / "d", cfg.load_config(cfg.TABLET, None, {"log.segment.file-size": "2KB"}))
    lm.load_logs()
    logs = {b: lm.get_or_create(TableBucket(1, b), SMALL) for b in range(4)}
    for i in range(30):
        logs[i % 4].append_as_leader(batch(2, ts=1_000 + i), 0)
        assert lm.held_bytes == _on_disk(lm.data_dir)
    logs[1].truncate_to(3)
    assert lm.held_bytes == _on_disk(lm.data_dir)
    lm.delete(TableBucket(1, 0))
    assert lm.held_bytes == _on_disk(lm.data_dir)
    lm.set_aside(TableBucket(1, 2))  # renamed to -stray: no longer held
    assert lm.held_bytes == sum(_on_disk(lm.data_dir / f"1-{b}") for b in (1, 3))
    lm.close_all_without_flush()  # its disk failed: nothing held here any more
    assert lm.held_bytes == 0
    reloaded = LogManager(tmp_path / "d", lm.config)
    reloaded.load_logs()
    assert reloaded.held_bytes == sum(_on_disk(lm.data_dir / f"1-{b}") for b in (1, 3)) > 0


def test_log_dirs_held_bytes_and_the_change_hook_follow_a_failed_and_recovered_dir(tmp_path: Path) -> None:
    config = cfg.load_config(cfg.TABLET, None, {"log.segment.file-size": "2KB", "log.dir.min-free": "0"})
    dirs = LogDirs([tmp_path / "a", tmp_path / "b"], config)
    dirs.load_logs()
    told: list[TableBucket] = []
    dirs.on_log_change = lambda t: told.append(t.table_bucket)
    for b in range(4):
        dirs.get_or_create(TableBucket(1, b), SMALL).append_as_leader(batch(3), 0)

    def on_disk() -> int:
        return sum(_on_disk(p) for p in dirs.paths if p not in dirs.offline)

    assert dirs.held_bytes == on_disk() > 0 and set(told) == {TableBucket(1, b) for b in range(4)}
    a_buckets = [tb for tb in dirs.logs if dirs.dir_of(tb) == tmp_path / "a"]
    dirs.fail(tmp_path / "a", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert dirs.held_bytes == on_disk() == _on_disk(tmp_path / "b")
    told.clear()
    assert [p for p, _ in dirs.try_recover(0)] == [tmp_path / "a"]
    assert dirs.held_bytes == on_disk() == _on_disk(tmp_path / "a") + _on_disk(tmp_path / "b")
    assert set(told) == set(a_buckets)  # the recovered dir's new manager tells the hook too
    told.clear()
    dirs.get(a_buckets[0]).append_as_leader(batch(2), 0)
    assert told == [a_buckets[0]] and dirs.held_bytes == on_disk()
