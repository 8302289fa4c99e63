"""LogManager and the per-dir checkpoints: load, checkpoint files, clean-shutdown marker, delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.config import Config
from fluss_py.errors import LogCorruptedError
from fluss_py.log import LogConfig, LogManager
from fluss_py.log.checkpoint import CLEAN_SHUTDOWN_MARKER, CheckpointFile, OffsetCheckpoint
from fluss_py.types import TableBucket

from .helpers import SMALL, batch


def manager(d: Path) -> LogManager:
    return LogManager(d, Config("tablet-server", {"log.segment.file-size": "2kb", "log.index.interval-size": 128}))


def test_log_config_from_config_and_table_properties() -> None:
    c = LogConfig.from_config(
        Config("tablet-server", {"log.segment.file-size": "1mb", "table.log.ttl": "2h"}),
        {"table.log.ttl": "30min", "table.log.retention-bytes": "10mb"},
    )
    assert c.segment_bytes == 1024 * 1024 and c.ttl_s == 1800 and c.retention_bytes == 10 * 1024 * 1024
    assert c.retention_ms == 1_800_000


def test_offset_checkpoint_format_and_errors(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / "recovery-point-offset-checkpoint")
    cp.write({TableBucket(3, 1): 50, TableBucket(1, 0): 7})
    assert cp.path.read_text() == "0\n2\n1 0 7\n3 1 50\n"
    assert cp.read() == {TableBucket(1, 0): 7, TableBucket(3, 1): 50}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    cp.path.write_text("0\n3\n1 0 7\n")
    with pytest.raises(LogCorruptedError, match="recovery-point-offset-checkpoint"):
        cp.read()
    assert CheckpointFile(tmp_path / "absent", 2).read() is None


def test_shutdown_then_load_is_clean_and_restores_offsets(tmp_path: Path) -> None:
    m = manager(tmp_path)
    a = m.get_or_create(TableBucket(1, 0), SMALL)
    b = m.get_or_create(TableBucket(2, 3))
    for _ in range(20):
        a.append_as_leader(batch(2), 0)
    b.append_as_leader(batch(5), 0)
    a.update_high_watermark(30)
    m.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert (tmp_path / "1-0").is_dir() and (tmp_path / "2-3").is_dir()

    m2 = manager(tmp_path)
    logs = m2.load_logs({TableBucket(1, 0): SMALL})
    assert m2.had_clean_shutdown and not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert logs[TableBucket(1, 0)].log_end_offset == 40 and logs[TableBucket(1, 0)].high_watermark == 30
    assert logs[TableBucket(2, 3)].log_end_offset == 5
    # a crash now (no shutdown) makes the next start unclean, recovering from the checkpointed points
    m2.checkpoint()
    for t in m2.logs.values():
        t.close_without_flush()
    m3 = manager(tmp_path)
    logs = m3.load_logs()
    assert not m3.had_clean_shutdown and logs[TableBucket(1, 0)].log_end_offset == 40


def test_delete_removes_dir_and_checkpoint_entry(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.get_or_create(TableBucket(1, 0)).append_as_leader(batch(), 0)
    m.get_or_create(TableBucket(1, 1))
    m.delete(TableBucket(1, 0))
    assert not (tmp_path / "1-0").exists() and m.get(TableBucket(1, 0)) is None
    m.get(TableBucket(1, 1)).append_as_leader(batch(), 0)  # (an unwritten log has no entry: nothing on disk)
    m.checkpoint()
    assert OffsetCheckpoint(tmp_path / "high-watermark-checkpoint").read() == {TableBucket(1, 1): 0}
    (tmp_path / "5-0-delete").mkdir()  # a delete interrupted by a crash is finished at load
    manager(tmp_path).load_logs()
    assert not (tmp_path / "5-0-delete").exists()


def test_unreadable_checkpoint_means_recover_everything(tmp_path: Path) -> None:
    m = manager(tmp_path)
    t = m.get_or_create(TableBucket(1, 0), SMALL)
    for _ in range(10):
        t.append_as_leader(batch(2), 0)
    m.flush_all()
    m.checkpoint()
    t.close_without_flush()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("junk")
    logs = manager(tmp_path).load_logs({TableBucket(1, 0): SMALL})
    assert logs[TableBucket(1, 0)].log_end_offset == 20


def test_offset_checkpoint_skips_a_write_of_unchanged_offsets(tmp_path: Path) -> None:
    cp = OffsetCheckpoint(tmp_path / "high-watermark-checkpoint")
    cp.write({TableBucket(1, 0): 5, TableBucket(1, 1): 0})
    inode = cp.path.stat().st_ino  # write_atomic replaces the file: a new inode means a rewrite
    cp.write({TableBucket(1, 1): 0, TableBucket(1, 0): 5})
    assert cp.path.stat().st_ino == inode
    cp.write({TableBucket(1, 0): 6, TableBucket(1, 1): 0})
    assert cp.path.stat().st_ino != inode
    assert cp.read() == {TableBucket(1, 0): 6, TableBucket(1, 1): 0}
