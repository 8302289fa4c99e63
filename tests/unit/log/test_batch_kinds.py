"""The attribute bits of primary-key tables are legal only where they belong (docs/primary-key-tables.md §3.3-3.4,
``record.batch.ensure_batch_kind``): a log table's log holds plain batches, a primary-key bucket's log its
changelog batches; a KV batch is never written to a log; both bits at once, or an unknown one, never parse."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.errors import InvalidRecordBatchError, TableTypeMismatchError
from fluss_py.log import LogConfig
from fluss_py.log.tablet import LogTablet
from fluss_py.record.batch import CHANGELOG, KV_BATCH, RecordBatch, RecordBatchBuilder
from fluss_py.types import TableBucket

TB = TableBucket(1, 0)


def batch(bits: int = 0) -> bytes:
    b = RecordBatchBuilder(attributes=bits)
    b.append(b"v", b"k")
    return b.build()


@pytest.mark.parametrize("bits", [KV_BATCH | CHANGELOG, 0x20, 0x100])
def test_both_kinds_at_once_or_an_unknown_bit_is_an_invalid_batch(bits: int) -> None:
    with pytest.raises(InvalidRecordBatchError):
        RecordBatch(batch(bits)).ensure_valid()


def test_a_kind_bit_keeps_the_crc_valid() -> None:
    for bits in (KV_BATCH, CHANGELOG):
        b = RecordBatch(batch(bits))
        b.ensure_valid()
        assert b.is_kv_batch == (bits == KV_BATCH) and b.is_changelog == (bits == CHANGELOG)


@pytest.mark.parametrize("changelog_log", [False, True])
def test_each_log_takes_its_kind_only_as_leader_and_as_follower(tmp_path: Path, changelog_log: bool) -> None:
    leader = LogTablet.open(tmp_path / "a" / "1-0", TB, LogConfig())
    follower = LogTablet.open(tmp_path / "b" / "1-0", TB, LogConfig())
    leader.holds_changelog = follower.holds_changelog = changelog_log
    good = CHANGELOG if changelog_log else 0
    for bits in (0, KV_BATCH, CHANGELOG):
        if bits == good:
            continue
        with pytest.raises(TableTypeMismatchError):
            leader.append_as_leader(batch(bits), 0)
        with pytest.raises(TableTypeMismatchError):
            follower.append_as_follower(batch(bits))
    assert leader.log_end_offset == follower.log_end_offset == 0  # nothing written
    leader.append_as_leader(batch(good), 0)
    follower.append_as_follower(leader.read(0, 1 << 20, 1).records)
    assert leader.log_end_offset == follower.log_end_offset == 1


def test_the_kv_directory_beside_a_log_is_not_log_data(tmp_path: Path) -> None:
    log = LogTablet.open(tmp_path / "1-0", TB, LogConfig())
    log.append_as_leader(batch(), 0)
    log.close()
    (tmp_path / "1-0" / "kv").mkdir()
    (tmp_path / "1-0" / "kv" / "CURRENT").write_text("MANIFEST-000001\n")
    assert LogTablet.open(tmp_path / "1-0", TB, LogConfig()).log_end_offset == 1
    (tmp_path / "1-0" / "other").mkdir()
    with pytest.raises(Exception, match="unknown entry"):
        LogTablet.open(tmp_path / "1-0", TB, LogConfig())
