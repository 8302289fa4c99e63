"""The append validators are pure with respect to tablet state: they read writer state and the epoch cache,
stamp the leader's buffer, and raise before anything could be written."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.errors import (
    CorruptMessageError,
    DuplicateSequenceError,
    InvalidRecordBatchError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
)
from fluss_py.log.epoch_cache import LeaderEpochCache
from fluss_py.log.validator import validate_follower_append, validate_leader_append
from fluss_py.log.writer_state import WriterStateManager
from fluss_py.record import RecordBatch, iter_batches
from tests.unit.log.helpers import TB, batch


def test_leader_assigns_offsets_and_stamps_epoch_without_touching_writer_state(tmp_path: Path) -> None:
    writers = WriterStateManager(tmp_path)
    buf = bytearray(batch(2, writer_id=7, writer_epoch=0, seq=0) + batch(3, writer_id=7, writer_epoch=0, seq=2))
    v = validate_leader_append(buf, 10, 4, 1 << 20, writers, TB)
    assert [(m.base_offset, m.last_offset) for m in v.metas] == [(10, 11), (12, 14)]
    assert v.next_offset == 15 and v.record_count == 5
    assert [(b.base_offset, b.leader_epoch) for b in iter_batches(buf)] == [(10, 4), (12, 4)]
    assert all(RecordBatch(bytes(buf[m.position : m.position + m.size])).is_valid() for m in v.metas)
    assert [u[:6] for u in v.writer_updates] == [(7, 0, 0, 1, 10, 11), (7, 0, 2, 4, 12, 14)]
    assert writers.writers == {}


def test_leader_reports_a_retry_and_refuses_a_mix(tmp_path: Path) -> None:
    writers = WriterStateManager(tmp_path)
    writers.update(7, 0, 0, 1, 10, 11, 1_000)
    retry = validate_leader_append(bytearray(batch(2, writer_id=7, writer_epoch=0, seq=0)), 12, 0, 1 << 20, writers, TB)
    assert not retry.metas and [(d.first_offset, d.last_offset) for d in retry.duplicates] == [(10, 11)]
    mixed = bytearray(batch(2, writer_id=7, writer_epoch=0, seq=0) + batch(1, writer_id=7, writer_epoch=0, seq=2))
    with pytest.raises(DuplicateSequenceError):
        validate_leader_append(mixed, 12, 0, 1 << 20, writers, TB)


def test_leader_rejects_oversized_corrupt_and_torn_requests(tmp_path: Path) -> None:
    writers = WriterStateManager(tmp_path)
    good = batch(2)
    with pytest.raises(RecordBatchTooLargeError):
        validate_leader_append(bytearray(good), 0, 0, len(good) - 1, writers, TB)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError):
        validate_leader_append(corrupt, 0, 0, 1 << 20, writers, TB)
    with pytest.raises(InvalidRecordBatchError):
        validate_leader_append(bytearray(good + good[:30]), 0, 0, 1 << 20, writers, TB)


def test_leader_refuses_a_max_timestamp_past_the_latest_allowed(tmp_path: Path) -> None:
    writers = WriterStateManager(tmp_path)
    request = batch(2, ts=1_000) + batch(2, ts=5_000)  # max timestamps 1_001 and 5_001
    assert validate_leader_append(bytearray(request), 0, 0, 1 << 20, writers, TB, 5_001).next_offset == 4
    assert validate_leader_append(bytearray(request), 0, 0, 1 << 20, writers, TB, None).next_offset == 4
    with pytest.raises(InvalidTimestampError, match="max timestamp 5001, 1 ms past"):
        validate_leader_append(bytearray(request), 0, 0, 1 << 20, writers, TB, 5_000)


def _stamped(n: int, base: int, epoch: int) -> bytes:
    buf = bytearray(batch(n))
    validate_leader_append(buf, base, epoch, 1 << 20, WriterStateManager(Path("/nonexistent")), TB)
    return bytes(buf)


def test_follower_keeps_offsets_collects_new_epochs_and_refuses_gaps(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(1, 0)
    records = _stamped(2, 5, 1) + _stamped(1, 7, 3)
    v = validate_follower_append(memoryview(records), 5, cache, TB)
    assert [(m.base_offset, m.last_offset) for m in v.metas] == [(5, 6), (7, 7)]
    assert v.new_epochs == [(3, 7)] and v.epoch == 3 and v.next_offset == 8
    assert cache.latest_epoch == 1
    with pytest.raises(InvalidRecordBatchError, match="expected 4"):
        validate_follower_append(memoryview(records), 4, cache, TB)


def test_follower_refuses_an_epoch_going_back_over_data(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(1, 0)
    cache.assign(2, 3)
    with pytest.raises(InvalidRecordBatchError, match="epoch 1 < latest 2"):
        validate_follower_append(memoryview(_stamped(1, 5, 1)), 5, cache, TB)
    # an epoch assigned at our LEO holds no data yet: the leader's older-epoch batch may replace it
    v = validate_follower_append(memoryview(_stamped(1, 3, 1)), 3, cache, TB)
    assert v.new_epochs == [(1, 3)] and v.epoch == 1
