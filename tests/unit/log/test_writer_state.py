"""Idempotent writer state: duplicates, gaps, epochs, expiry, snapshots, follower-built state."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.errors import DuplicateSequenceError, InvalidWriterEpochError, OutOfOrderSequenceError
from fluss_py.log.writer_state import WriterStateManager, snapshot_path

from .helpers import batch, open_log


def wb(seq: int, n: int = 2, epoch: int = 0, wid: int = 7, ts: int = 1000) -> bytes:
    return batch(n, writer_id=wid, writer_epoch=epoch, seq=seq, ts=ts)


def test_duplicate_returns_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    first = t.append_as_leader(wb(0), 1)
    t.append_as_leader(wb(2), 1)
    size = t.size_in_bytes
    again = t.append_as_leader(wb(0), 1)
    assert again.duplicate and (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset)
    assert t.size_in_bytes == size and t.log_end_offset == 4


def test_gap_and_old_epoch_and_new_epoch(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    t.append_as_leader(wb(0, epoch=3), 1)
    with pytest.raises(OutOfOrderSequenceError, match="expected 2"):
        t.append_as_leader(wb(5, epoch=3), 1)
    with pytest.raises(InvalidWriterEpochError):
        t.append_as_leader(wb(2, epoch=2), 1)
    with pytest.raises(OutOfOrderSequenceError, match="expected 0"):
        t.append_as_leader(wb(2, epoch=4), 1)
    t.append_as_leader(wb(0, epoch=4), 1)  # a bumped epoch restarts at 0 and resets the cache
    state = t.writer_state(7)
    assert state.writer_epoch == 4 and len(state.batches) == 1
    assert t.log_end_offset == 4


def test_only_last_five_batches_are_remembered(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    for i in range(7):
        t.append_as_leader(wb(2 * i), 1)
    assert len(t.writer_state(7).batches) == 5
    assert t.append_as_leader(wb(4), 1).duplicate  # 3rd batch: still cached
    with pytest.raises(OutOfOrderSequenceError):
        t.append_as_leader(wb(0), 1)  # 1st batch: forgotten


def test_multi_batch_request_sequences_and_mixed_duplicates(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    info = t.append_as_leader(wb(0) + wb(2) + wb(0, wid=8), 1)
    assert (info.first_offset, info.last_offset) == (0, 5)
    with pytest.raises(DuplicateSequenceError):
        t.append_as_leader(wb(2) + wb(4), 1)
    with pytest.raises(OutOfOrderSequenceError):
        t.append_as_leader(wb(4) + wb(7), 1)
    assert t.log_end_offset == 6


def test_follower_state_answers_retry_after_leader_change(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "a")
    original = leader.append_as_leader(wb(0), 1)
    follower = open_log(tmp_path / "b")
    follower.append_as_follower(leader.read(0, 1 << 20, leader.log_end_offset).records)
    # The follower becomes leader (epoch 2); the writer retries the same batch.
    retry = follower.append_as_leader(wb(0), 2)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (original.first_offset, original.last_offset)
    assert follower.log_end_offset == 2


def test_expiry_of_idle_writers(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    t.append_as_leader(wb(0, ts=1_000), 1)
    t.append_as_leader(wb(0, wid=8, ts=50_000), 1)
    assert t.writers.expire(now_ms=60_000, expiration_ms=30_000) == 1
    assert t.writer_state(7) is None and t.writer_state(8) is not None
    t.append_as_leader(wb(10), 1)  # an unknown writer is accepted at any sequence


def test_snapshot_round_trip_and_rebuild_on_open(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = open_log(d)
    for i in range(30):
        t.append_as_leader(wb(2 * i) + wb(i, n=1, wid=9), 1)
    snaps = t.writers.snapshot_offsets()
    assert snaps and len(snaps) <= 3  # one per roll, only the latest few kept
    before = {w: (e.writer_epoch, list(e.batches)) for w, e in t.writers.writers.items()}
    t.close()
    assert snapshot_path(d, t.log_end_offset).exists()
    t = open_log(d, clean_shutdown=True)
    assert {w: (e.writer_epoch, list(e.batches)) for w, e in t.writers.writers.items()} == before
    t.close_without_flush()
    for p in d.glob("*.snapshot"):  # no snapshots at all: rebuilt by replaying the log
        p.unlink()
    t = open_log(d)
    assert {w: (e.writer_epoch, list(e.batches)) for w, e in t.writers.writers.items()} == before


def test_corrupt_snapshot_is_deleted_and_older_used(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = open_log(d)
    for i in range(30):
        t.append_as_leader(wb(2 * i), 1)
    t.close()
    latest = snapshot_path(d, t.log_end_offset)
    raw = bytearray(latest.read_bytes())
    raw[-1] ^= 0xFF
    latest.write_bytes(bytes(raw))
    t = open_log(d, clean_shutdown=True)
    assert not latest.exists()
    assert t.writer_state(7).last_seq == 59


def test_manager_check_is_side_effect_free(tmp_path: Path) -> None:
    m = WriterStateManager(tmp_path)
    m.update(1, 0, 0, 1, 0, 1, 5)
    pending: dict = {}
    assert m.check(1, 0, 2, 3, pending) is None
    assert pending == {1: (0, 3)} and m.writers[1].last_seq == 1
