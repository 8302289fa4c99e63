"""Checkpoint files that do not parse, or parse and contradict the log: rebuilt from the log with one
warning, never an exception out of ``LogTablet.open`` / ``LogManager.load_logs`` (docs/storage.md "Bad
checkpoints"). The pure checks (``fluss_py.log.reconcile``) are tested case by case, then every kind of file
on real directories."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluss_py import config as cfg
from fluss_py.log.checkpoint import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from fluss_py.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from fluss_py.log.manager import LogManager
from fluss_py.log.reconcile import epoch_cache_contradiction, reconcile_offsets
from fluss_py.log.writer_state import SNAPSHOT_SUFFIX, WriterStateManager, snapshot_path
from fluss_py.types import EpochEntry

from .helpers import TB, batch, open_log

E = EpochEntry


# ------------------------------------------------------------------------------------------ pure checks
# A log of batches [0..9] epoch 0, [10..19] epoch 2, [20..29] epoch 5 (batches of 5 records).
def _header(offset: int) -> tuple | None:
    if not 0 <= offset < 30:
        return None
    base = offset - offset % 5
    epoch = 0 if base < 10 else 2 if base < 20 else 5
    return (base, 0, epoch, 0, 0, 0, 4)


def contradiction(entries, clean=True, start=0, end=30):
    return epoch_cache_contradiction(entries, start, end, _header, _header(end - 1), clean)


@pytest.mark.parametrize(
    "entries",
    [
        [E(0, 0), E(2, 10), E(5, 20)],
        [E(0, 0), E(2, 10), E(5, 20), E(7, 30)],  # a new leader's epoch at the log end
        [E(2, 10), E(5, 20)],  # the first entry after the log start (the cache says nothing below 10)
    ],
)
def test_entries_that_match_the_batches_are_accepted(entries) -> None:
    assert contradiction(entries) is None


@pytest.mark.parametrize(
    "entries, why",
    [
        ([E(0, 0), E(2, 10), E(99, 20)], "leader epoch 5"),  # an epoch above the log's, covering data
        ([E(0, 0), E(2, 10), E(5, 20), E(9, 25)], "leader epoch 5"),  # a lying entry inside the last epoch
        ([E(0, 0), E(2, 12), E(5, 20)], "batch boundary"),
        ([E(0, 0), E(2, 10)], "last batch"),  # the newest entry lost
        ([], "last batch"),
        ([E(0, 0), E(2, 10), E(5, 20), E(6, 31)], "past the log end"),
    ],
)
def test_entries_that_contradict_the_batches_are_named(entries, why) -> None:
    assert why in contradiction(entries)


def test_entries_past_the_end_after_a_crash_are_not_a_contradiction() -> None:
    assert contradiction([E(0, 0), E(2, 10), E(5, 20), E(6, 31)], clean=False) is None


@given(
    first=st.integers(0, 100),
    length=st.integers(0, 100),
    log_start=st.none() | st.integers(-5, 300),
    hw=st.integers(-5, 300),
    rp=st.integers(-5, 300),
    clean=st.booleans(),
)
def test_reconciled_offsets_always_lie_inside_the_log(first, length, log_start, hw, rp, clean) -> None:
    end = first + length
    o = reconcile_offsets(first, end, log_start, hw, rp, clean)
    assert first <= o.log_start <= o.high_watermark <= end
    assert o.log_start <= o.recovery_point <= end
    assert (o.log_start == first) or (log_start is not None and o.log_start == log_start)
    past_end = (log_start or 0) > end or (clean and (hw > end or rp > end))
    assert bool(o.problems) == past_end


# ------------------------------------------------------------------------------------------ real directories
def _log_with_three_epochs(d: Path) -> None:
    t = open_log(d)
    for epoch in (0, 2, 5):
        for _ in range(4):
            t.append_as_leader(batch(5), epoch)
    t.close()


def _reopen(d: Path, caplog, clean: bool = True, **kw):
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fluss_py.log"):
        t = open_log(d, clean_shutdown=clean, **kw)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return t, warnings


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"0\n3\n0 0\n2 20\n\xff\xfe\xfd 40\n", id="non-utf8"),
        pytest.param(b"0\n3\n0 0\n2 20\n\xd9\xa5 40\n", id="non-ascii-digit"),
        pytest.param(b"0\n3\n0 0\n2 20\n", id="count-lies"),
        pytest.param(b"\x00" * 64, id="zeros"),
        pytest.param(b"0\n3\n0 0\n2 20\n99 40\n", id="epoch-above-the-logs"),
        pytest.param(b"0\n3\n0 0\n2 20\n5 45\n", id="entry-inside-a-batch-run"),
        pytest.param(b"0\n4\n0 0\n2 20\n5 40\n6 500\n", id="entry-past-the-log-end"),
        pytest.param(b"0\n2\n0 0\n2 20\n", id="last-entry-missing"),
    ],
)
def test_a_bad_leader_epoch_checkpoint_is_rebuilt_with_one_warning(tmp_path: Path, caplog, content: bytes) -> None:
    d = tmp_path / "1-0"
    _log_with_three_epochs(d)
    (d / LEADER_EPOCH_CHECKPOINT).write_bytes(content)
    t, warnings = _reopen(d, caplog)
    assert t.epoch_cache.entries() == [E(0, 0), E(2, 20), E(5, 40)]
    assert (d / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n3\n0 0\n2 20\n5 40\n"
    assert len(warnings) == 1 and LEADER_EPOCH_CHECKPOINT in warnings[0] and "rebuilding" in warnings[0], warnings
    assert t.log_end_offset == 60
    t.append_as_leader(batch(1), 5)  # and it works: the leader's own epoch is not fenced
    t.close()


def test_a_new_leaders_epoch_at_the_log_end_is_no_contradiction(tmp_path: Path, caplog) -> None:
    """(Assigned at election before the first write; the loader drops it as Kafka does: truncation from the
    log end, and the next election assigns a new one.)"""
    d = tmp_path / "1-0"
    _log_with_three_epochs(d)
    (d / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n4\n0 0\n2 20\n5 40\n7 60\n")
    t, warnings = _reopen(d, caplog)
    assert t.epoch_cache.entries() == [E(0, 0), E(2, 20), E(5, 40)] and warnings == []
    t.close()


def test_a_writer_snapshot_contradicting_its_name_is_dropped_for_an_older_one(tmp_path: Path, caplog) -> None:
    d = tmp_path / "1-0"
    t = open_log(d)
    for i in range(6):
        t.append_as_leader(batch(5, writer_id=3, writer_epoch=0, seq=5 * i), 0)
    t.close()
    snaps = sorted(d.glob(f"*{SNAPSHOT_SUFFIX}"))
    assert snaps and snaps[-1].name == f"{30:020d}{SNAPSHOT_SUFFIX}"
    # The snapshot taken at 30 renamed as if taken at 10: a valid CRC, batches at 25..29 >= 10.
    shutil.copy(snaps[-1], snapshot_path(d, 10))
    with pytest.raises(Exception, match="does not lie below 10"):
        WriterStateManager.read_snapshot(snapshot_path(d, 10))
    snaps[-1].unlink()
    t, warnings = _reopen(d, caplog)
    assert [w for w in warnings if "snapshot" in w], warnings
    assert t.writers.writers[3].batches[-1].last_offset == 29  # rebuilt by replaying the log
    t.close()


@pytest.mark.parametrize(
    "name",
    [HIGH_WATERMARK_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT],
)
@pytest.mark.parametrize(
    "content, warning",
    [
        (b"0\n1\n1 0 \xff\xff\n", "unreadable"),
        (b"0\n2\n1 0 5\n1 0 6\n", "unreadable"),  # one bucket twice
        (b"0\n1\n1 0 -4\n", "unreadable"),
        (b"0\n1\n1 0 999999\n", "past the log end"),
    ],
)
def test_data_dir_checkpoints_unreadable_or_past_the_end_keep_the_log(
    tmp_path: Path, caplog, name: str, content: bytes, warning: str
) -> None:
    data = tmp_path / "data"
    config = cfg.Config(cfg.TABLET, {cfg.DATA_DIR.key: str(data)})
    m = LogManager(data, config)
    m.load_logs()
    t = m.get_or_create(TB)
    for _ in range(10):
        t.append_as_leader(batch(2), 0)
    t.update_high_watermark(20)
    m.shutdown()
    (data / name).write_bytes(content)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fluss_py.log"):
        m = LogManager(data, config)
        logs = m.load_logs()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warning in warnings[0], warnings
    t = logs[TB]
    assert (t.log_start_offset, t.log_end_offset) == (0, 20)
    assert t.high_watermark <= 20 and t.recovery_point <= 20
    m.shutdown()
